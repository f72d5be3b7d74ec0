# Serves: the README's demo (`cargo xtask demo`), a tuning workload.
"""The README's demo: a service with a warm heap, as `cargo xtask demo` runs it twice (CPython's
defaults, then under `neurogc-agent --mode act`) to print one before/after line.

In-process and open loop: request i is due at start + i/rate whatever happened before, and its
latency is counted from that due time, so a request that waited behind a collection counts the
wait. Each request walks part of a warm cache (≈0.6M long-lived containers) and builds a small
object graph with back-references (cyclic garbage), and one in fifty replaces a cache entry.
Pauses are timed by the service's own gc.callbacks. Writes one JSON object to --result.

  python demo_service.py --result FILE [--warmup S] [--seconds S] [--rate R]
"""
import argparse
import gc
import json
import os
import time

_pause = [0, 0]  # start, total ns
_counts = [0, 0, 0]


def _callback(phase, info):
    if phase == "start":
        _pause[0] = time.perf_counter_ns()
    else:
        _pause[1] += time.perf_counter_ns() - _pause[0]
        _counts[info["generation"]] += 1


class Node:
    def __init__(self, parent, depth):
        self.parent = parent
        self.children = []
        self.attrs = {"depth": depth, "tags": [depth, parent is None]}


def build(depth, width, parent=None):
    node = Node(parent, depth)
    if depth:
        node.children = [build(depth - 1, width, node) for _ in range(width)]
    return node


def entry(i):
    return {"id": i, "values": [i, i + 1, i + 2], "meta": {"owner": [i % 97], "flags": (i, i)}}


def request(cache, i, size):
    tree = build(4, 4)  # 341 nodes, each with a dict and two lists: cyclic through .parent
    total = 0
    for k in range(50):
        total += cache[(i * 7919 + k * 104729) % size]["values"][0]
    if i % 50 == 0:
        cache[(i * 31) % size] = entry(i)
    return total + len(tree.children)


def rss_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--result", required=True)
    ap.add_argument("--entries", type=int, default=150_000)
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=300.0)
    args = ap.parse_args()
    cache = [entry(i) for i in range(args.entries)]
    gc.callbacks.append(_callback)
    latencies = []
    start = time.perf_counter()
    measure_from = start + args.warmup
    end = measure_from + args.seconds
    base_pause = base_counts = None
    i = 0
    while True:
        due = start + i / args.rate
        if due >= end:
            break
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        if base_pause is None and due >= measure_from:
            base_pause, base_counts = _pause[1], list(_counts)
        request(cache, i, args.entries)
        if due >= measure_from:
            latencies.append(time.perf_counter() - due)
        i += 1
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3
    with open(args.result, "w") as f:
        json.dump(
            {
                "requests": len(latencies),
                "p50_ms": q(0.5),
                "p99_ms": q(0.99),
                "max_ms": latencies[-1] * 1e3,
                "gc_share": (_pause[1] - base_pause) / 1e9 / args.seconds,
                "collections": [c - b for c, b in zip(_counts, base_counts)],
                "peak_rss_mib": rss_bytes("VmHWM:") / 1048576,
            },
            f,
        )
    os._exit(0)


if __name__ == "__main__":
    main()
