# Serves: benchmarks: `bench locust`'s load.
"""The shape of the experiment that inspired neurogc, for `cargo xtask bench locust`: locust
users hitting the cache service's /work, each waiting a second between requests, run as
`locust --headless -u 100 -r 10 --run-time 1m`.
"""
from locust import HttpUser, constant, task


class Client(HttpUser):
    wait_time = constant(1)

    @task
    def work(self):
        self.client.get("/work")
