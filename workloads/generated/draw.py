# Serves: benchmarks: the seeded workload distribution steering is judged on (`cargo xtask bench draws`).
"""One draw from a distribution of services and batch jobs, for judging steering on workloads
it was not tuned on. Every size, rate and shape comes from the seed:

  python draw.py --seed N [--recipe none|freeze|freeze-5k|freeze-20k|static|gc-off] [--describe]

Axes (see draw()):
  warm heap       0 to 2M tracked containers (dict entries of tuples, lists, dicts or instances)
  built           before attach (before "ready"), or still growing through the run
  turnover        none; a share of entries replaced per request; or the whole structure
                  rebuilt and swapped in every few seconds (by a background builder thread or
                  by the main thread)
  garbage         per request or step: how many objects, cyclic or acyclic, instances with
                  __dict__ or __slots__, tuples, lists or dicts, untracked payload bytes each
  load            a service: requests at a rate (open loop, arrivals on a clock: a request
                  that arrives during a pause waits) or back to back (closed loop); a batch job:
                  steps back to back
  threads         0 to 2 extra threads doing requests of their own, plus the builder
  judged on       a service's p99 latency, a batch job's total time

Seed pools (never mix them): 1-999 is the tuning pool, free to look at while building the
controller; 1000-1999 is the evaluation pool, which a benchmark samples and nobody tunes on.

Protocol as workloads/workload.py's run_batch: prints "ready", reads "go WARMUP_SECONDS STEPS"
(STEPS: requests for a service, steps for a batch job), runs unmeasured for WARMUP_SECONDS,
prints "measuring", runs STEPS, prints "result JSON" (each request's latency from its arrival,
or each step's time). --describe prints the draw as JSON and exits.
"""
import argparse
import gc
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import workload  # noqa: E402

TUNING_POOL = range(1, 1000)
EVALUATION_POOL = range(1000, 2000)


def draw(seed):
    """The workload's parameters, all from the seed."""
    rng = random.Random(seed * 7919 + 17)
    kind = rng.choice(["service", "service", "service", "batch"])
    heap = 0 if rng.random() < 0.1 else int(10 ** rng.uniform(4.0, 6.3))  # up to 2M containers
    turnover = rng.choice(["none", "none", "entries", "rebuild"])
    if heap == 0:
        turnover = "none"
    return {
        "seed": seed,
        "kind": kind,
        "heap": heap,
        "heap_shape": rng.choice(["tuples", "lists", "dicts", "slots", "instances"]),
        "growing": heap > 0 and rng.random() < 0.25,
        "turnover": turnover,
        # entries: entries replaced per request; rebuild: seconds between swaps.
        "replace_per_request": rng.choice([4, 32, 256]) if turnover == "entries" else 0,
        "rebuild_every_s": round(rng.uniform(2.0, 8.0), 1) if turnover == "rebuild" else 0.0,
        "builder_thread": turnover == "rebuild" and rng.random() < 0.7,
        "garbage": int(10 ** rng.uniform(1.5, 3.5)),  # objects per request or step
        "cyclic": round(rng.choice([0.0, 0.5, 1.0, 1.0]), 2),
        "garbage_shape": rng.choice(["slots", "instances", "tuples", "lists", "dicts"]),
        "payload": rng.choice([0, 0, 0, 256, 4096, 16384]),
        "rate": rng.choice([50, 100, 200, 400]) if kind == "service" else 0,
        "open_loop": kind == "service" and rng.random() < 0.8,
        "threads": rng.choice([0, 0, 0, 1, 2]),
    }


class Slot:
    __slots__ = ("peer", "data", "__weakref__")

    def __init__(self, data=None):
        self.peer = None
        self.data = data


class Inst:
    def __init__(self, data=None):
        self.peer = None
        self.data = data


def entry(shape, i):
    """One long-lived entry of the warm heap (a few tracked containers)."""
    if shape == "tuples":
        return (str(i), (i, i + 1), [i])
    if shape == "lists":
        return [i, [i, str(i)], [i + 1]]
    if shape == "dicts":
        return {"v": i, "tags": [i], "meta": {"k": i}}
    if shape == "slots":
        return Slot([i, {"v": i}])
    return Inst({"v": i, "tags": [i]})


def build(shape, n, cyclic_links):
    """The warm structure: n entries, and, where it is replaced whole, linked into cycles (a
    parse tree, a catalog whose items point back at it), so only the collector frees it."""
    d = {}
    root = {"entries": d}
    for i in range(n):
        e = entry(shape, i)
        if cyclic_links and i % 4 == 0:
            d[i] = [e, root]
        else:
            d[i] = e
    return root


def garbage(p, i):
    """What one request or step leaves behind."""
    shape, n, payload = p["garbage_shape"], p["garbage"], p["payload"]
    blob = bytes(payload) if payload else None
    cyclic = (i % 100) < p["cyclic"] * 100
    if shape in ("slots", "instances"):
        cls = Slot if shape == "slots" else Inst
        nodes = [cls(blob) for _ in range(n)]
        if cyclic:
            for a, b in zip(nodes, nodes[1:] + nodes[:1]):
                a.peer = b
        return len(nodes)
    make = {"tuples": lambda k: (k, blob, [k]), "lists": lambda k: [k, blob], "dicts": lambda k: {"k": k, "b": blob}}[shape]
    nodes = [make(k) for k in range(n)]
    if cyclic:
        holder = [nodes]
        for node in nodes[:: max(1, n // 64)]:
            if isinstance(node, list):
                node.append(holder)
            elif isinstance(node, dict):
                node["up"] = holder
            else:
                node[2].append(holder)
    return len(nodes)


class Heap:
    """The warm structure and what turns it over."""

    def __init__(self, p):
        self.p = p
        self.cyclic_links = p["turnover"] == "rebuild"
        start = p["heap"] // 3 if p["growing"] else p["heap"]
        self.root = build(p["heap_shape"], start, self.cyclic_links)
        self.size = start
        self.next_swap = time.monotonic() + p["rebuild_every_s"]
        self.lock = threading.Lock()

    def touch(self, i):
        p = self.p
        d = self.root["entries"]
        if p["growing"] and self.size < p["heap"]:
            # Grows to its full size over about a minute of requests.
            for _ in range(max(1, p["heap"] // 12000)):
                d[self.size] = entry(p["heap_shape"], self.size)
                self.size += 1
        if p["replace_per_request"] and self.size:
            for k in range(p["replace_per_request"]):
                key = (i * 7919 + k * 104729) % self.size
                d[key] = entry(p["heap_shape"], key)
        elif self.size:
            _ = d.get(i % self.size)
        if p["turnover"] == "rebuild" and not p["builder_thread"] and time.monotonic() >= self.next_swap:
            self.swap()

    def swap(self):
        fresh = build(self.p["heap_shape"], self.size, self.cyclic_links)
        with self.lock:
            self.root = fresh
        self.next_swap = time.monotonic() + self.p["rebuild_every_s"]

    def builder(self):
        while True:
            time.sleep(max(0.0, self.next_swap - time.monotonic()))
            self.swap()


def request(p, heap, i):
    heap.touch(i)
    return garbage(p, i)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    ap.add_argument("--describe", action="store_true")
    args = ap.parse_args()
    p = draw(args.seed)
    if args.describe:
        print(json.dumps(p))
        return
    workload.install()
    heap = Heap(p)
    for i in range(200):
        request(p, heap, i)
    workload.apply_recipe(args.recipe)
    if p["builder_thread"]:
        threading.Thread(target=heap.builder, daemon=True).start()
    for t in range(p["threads"]):
        # Other threads doing requests of their own, at a tenth of the rate each.
        def side(t=t):
            j = 0
            while True:
                request(p, heap, 1_000_000 * (t + 1) + j)
                j += 1
                time.sleep(10.0 / max(p["rate"], 50))

        threading.Thread(target=side, daemon=True).start()
    if p["kind"] == "batch":
        workload.run_batch(lambda i: request(p, heap, i))
        return
    # A service: request i arrives at start + i / rate (open loop) or when the one before it is
    # done (closed loop); its latency runs from its arrival, so a pause delays what queues behind.
    clock = {"start": None, "i": 0}
    interval = 1.0 / p["rate"]

    def serve(i):
        if clock["start"] is None:
            clock["start"] = time.perf_counter()
        if p["open_loop"]:
            arrival = clock["start"] + clock["i"] * interval
            clock["i"] += 1
            wait = arrival - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        else:
            arrival = time.perf_counter()
        request(p, heap, i)
        # run_batch times the call; the queueing before it is added here.
        clock["queued"] = max(0.0, time.perf_counter() - arrival)

    workload.run_batch(serve, on_measuring=lambda: clock.update(start=None, i=0), latency=lambda: clock["queued"])


if __name__ == "__main__":
    main()
