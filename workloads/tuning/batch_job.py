# Serves: benchmarks, tuning family (written while the controller was built).
"""A training-loop-like batch job for `cargo xtask bench steer` (standard library only).

It holds long-lived state the way a training process does (--state parameter/optimizer entries
and a dataset index, three tracked containers each: ≈ 0.9M tracked objects by default), and every
step builds a small autograd-like graph (nodes that point at their parents and back at their
children: cycles that only the collector frees), walks it, logs a metrics dict and updates a few
state entries.

  python batch_job.py [--state N] [--graph K] [--recipe none|static|gc-off]

Protocol (so that an agent can attach before anything is measured): prints "ready", reads one
line "go WARMUP_SECONDS STEPS", runs unmeasured steps for WARMUP_SECONDS, then STEPS measured
steps, and prints "result JSON": every step's time, the total, peak RSS, the collector's counts
and pauses per generation (workloads/workload.py) over the measured steps.
"""
import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import workload  # noqa: E402


class Node:
    __slots__ = ("parents", "children", "value", "grad")

    def __init__(self, value, parents):
        self.value = value
        self.grad = None
        self.parents = parents
        self.children = []
        for p in parents:
            p.children.append(self)


STATE = {}
HISTORY = []


def build_state(n):
    for i in range(n):
        STATE[i] = ([float(i), 0.0], {"m": 0.0, "v": 0.0}, (i, str(i)))


def step(i, graph):
    # Forward: a layered graph, every node linked both ways to two parents.
    layer = [Node(float(j), []) for j in range(16)]
    nodes = list(layer)
    while len(nodes) < graph:
        layer = [Node(a.value * 0.5 + b.value, [a, b]) for a, b in zip(layer, layer[1:] + layer[:1])]
        nodes.extend(layer)
    # Backward: a gradient list per node, from the last layer to the first.
    for n in reversed(nodes):
        n.grad = [n.value, sum(c.value for c in n.children)]
    loss = sum(n.grad[1] for n in layer)
    HISTORY.append({"step": i, "loss": loss})
    for k in range(8):
        key = (i * 7919 + k) % len(STATE)
        STATE[key] = ([loss, float(k)], {"m": loss, "v": 0.0}, (key, str(key)))
    return loss



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--state", type=int, default=300_000)
    p.add_argument("--graph", type=int, default=400)
    p.add_argument("--recipe", choices=workload.RECIPES, default="none")
    args = p.parse_args()
    workload.install()
    build_state(args.state)
    for i in range(50):
        step(i, args.graph)
    workload.apply_recipe(args.recipe)
    print("ready", flush=True)
    _, warmup, steps = sys.stdin.readline().split()
    i, until = 50, time.monotonic() + float(warmup)
    while time.monotonic() < until:
        step(i, args.graph)
        i += 1
    print("measuring", flush=True)
    before = [s["collections"] for s in gc.get_stats()]
    pauses_before = workload.stats()
    step_ms = []
    start = time.perf_counter()
    for _ in range(int(steps)):
        t = time.perf_counter()
        step(i, args.graph)
        step_ms.append((time.perf_counter() - t) * 1e3)
        i += 1
    total = time.perf_counter() - start
    after = [s["collections"] for s in gc.get_stats()]
    print("result " + json.dumps({
        "step_ms": step_ms,
        "total_s": total,
        "peak_rss_bytes": workload.peak_rss_bytes(),
        "collections": [a - b for a, b in zip(after, before)],
        "pauses_before": pauses_before,
        "pauses": workload.stats(),
    }), flush=True)


if __name__ == "__main__":
    main()
