# Serves: benchmarks, tuning family (cache, memory-risk and phases services).
"""A cache-heavy HTTP service for `cargo xtask bench steer` (standard library only).

It holds a large warm heap (--entries cache entries, three tracked containers each: ≈ 1.2M
tracked objects by default) and answers GET /work by building per-request cyclic garbage and
touching the cache, so that full collections walk the whole heap while requests wait. GET /burst
builds three times the garbage (the phases workload's burst).

  python cache_service.py [--entries N] [--garbage K] [--payload BYTES] [--recipe none|static|gc-off]

--payload: each garbage node also carries BYTES of untracked data. The collector's thresholds
count tracked allocations only, so rarer collections let this pile up: the memory-risk workload.

--recipe static: after warm-up, gc.freeze() and gc.set_threshold(50_000, 20, 20) (the hand-tuned
production recipe the agent is compared against); gc-off: gc.disable() (a bound, not a recipe).
Prints "ready PORT" once it listens. GET /stats answers the collector's own counts, pauses per
generation (workloads/workload.py) and the process's peak RSS (VmHWM).
"""
import argparse
import gc
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import workload  # noqa: E402


class Node:
    __slots__ = ("peer", "payload", "__weakref__")

    def __init__(self):
        self.peer = None
        self.payload = None


CACHE = {}
ARGS = None
SERVED = [0]


def build_cache(entries):
    for n in range(entries):
        CACHE[n] = (str(n), [n, n + 1], {"v": n})


def work(i, scale=1):
    # Request-scoped garbage in cycles: only the collector frees it.
    nodes = [Node() for _ in range(ARGS.garbage * scale)]
    for a, b in zip(nodes, nodes[1:] + nodes[:1]):
        a.peer = b
        a.payload = {"id": i, "tags": [i, "x"]}
        if ARGS.payload:
            a.payload["blob"] = bytes(ARGS.payload)
    # Touch the cache like a service would: replace a few entries.
    for k in range(4):
        key = (i * 7919 + k) % ARGS.entries
        CACHE[key] = (str(key), [key, i], {"v": i})
    return len(nodes)



class Server(HTTPServer):
    # Open-loop load queues connections while a collection stops the world: keep them all.
    request_queue_size = 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        if self.path == "/stats":
            body = json.dumps(workload.stats_document(SERVED[0])).encode()
        else:
            SERVED[0] += 1
            body = json.dumps({"n": work(SERVED[0], 3 if self.path == "/burst" else 1)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--entries", type=int, default=400_000)
    p.add_argument("--garbage", type=int, default=300)
    p.add_argument("--payload", type=int, default=0)
    p.add_argument("--recipe", choices=workload.RECIPES, default="none")
    ARGS = p.parse_args()
    workload.install()
    build_cache(ARGS.entries)
    # Warm-up: a few hundred requests' worth of garbage, as a service has after start.
    for i in range(300):
        work(i)
    workload.apply_recipe(ARGS.recipe)
    server = Server(("127.0.0.1", 0), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
