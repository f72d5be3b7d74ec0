# Serves: tests (GC load shapes), and `bench policy`.
"""GC workload profiles for training the default model, the act-mode tests and benchmarks.

  python profiles.py PROFILE [--seconds S] [--threshold T0 [T1 T2]] [--report-thresholds SECS]

Profiles (each stresses the collector differently, so the best thresholds differ):
  cycles   short-lived reference cycles: every collection finds garbage
  cache    a large long-lived heap, every entry replaced in turn, plus request-like churn:
           full collections are expensive
  acyclic  container churn without cycles: the collector finds nothing, it is pure overhead
  bulky    cycles that hold large buffers: memory grows with threshold0
  warm     a large heap built once and never changed, sessions that live a while, cyclic
           garbage: full collections walk the unchanging heap (what a freeze takes out of them)

--report-thresholds SECS: print {"t": elapsed, "thresholds": gc.get_threshold(), "frozen":
gc.get_freeze_count()} every SECS (the act-mode tests read what the target itself sees). Prints a final JSON line with
{"profile", "iterations", "elapsed_s"} and exits with os._exit(0).
"""
import argparse
import collections
import gc
import json
import os
import sys
import time


class Node:
    __slots__ = ("peer", "payload", "__weakref__")

    def __init__(self, payload=None):
        self.peer = None
        self.payload = payload


def step_cycles(state, i):
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    a.payload = [a, {"k": b}]


def step_cache(state, i):
    cache = state.setdefault("cache", None)
    if cache is None:
        state["cache"] = cache = {n: (str(n), [n, n + 1], {"v": n}) for n in range(300_000)}
    request = {"id": i, "items": [(j, str(j)) for j in range(8)], "meta": {"path": "/x"}}
    cache[i % 300_000] = (str(i), request["items"][0], {"v": i})
    if i % 50 == 0:
        a = Node()
        a.peer = a


def step_acyclic(state, i):
    rows = [(i, j, {"j": j}) for j in range(6)]
    state["last"] = rows


def step_bulky(state, i):
    a, b = Node(bytearray(4096)), Node()
    a.peer, b.peer = b, a


def step_warm(state, i):
    if "heap" not in state:
        state["heap"] = {n: (str(n), [n, n + 1], {"v": [n]}) for n in range(300_000)}
        state["sessions"] = collections.deque(maxlen=20_000)
    # Sessions outlive the young generations, so they are promoted and the full collections
    # that count them come about once a second (300 ms each on this VM); unlike the cache's
    # entries none of the heap is ever replaced, so what a freeze takes out of those
    # collections stays out.
    state["sessions"].append([i, {"id": i}])
    if i % 50 == 0:
        a = Node()
        a.peer = a


STEPS = {"cycles": step_cycles, "cache": step_cache, "acyclic": step_acyclic, "bulky": step_bulky,
         "warm": step_warm}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("profile", choices=sorted(STEPS))
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--threshold", type=int, nargs="+")
    p.add_argument("--report-thresholds", type=float, default=0.0)
    args = p.parse_args()
    if args.threshold:
        t = list(gc.get_threshold())
        t[: len(args.threshold)] = args.threshold
        gc.set_threshold(*t)
    step = STEPS[args.profile]
    state = {}
    step(state, 0)  # build any long-lived heap before the clock starts
    started = time.monotonic()
    next_report = started
    i = 0
    while True:
        now = time.monotonic()
        if now - started >= args.seconds:
            break
        if args.report_thresholds and now >= next_report:
            print(json.dumps({"t": now - started, "thresholds": list(gc.get_threshold()),
                              "frozen": gc.get_freeze_count()}), flush=True)
            next_report = now + args.report_thresholds
        for _ in range(200):
            step(state, i)
            i += 1
    gc.disable()
    print(json.dumps({"profile": args.profile, "iterations": i, "elapsed_s": time.monotonic() - started,
                      "thresholds": list(gc.get_threshold())}), flush=True)
    sys.stdout.flush()
    os._exit(0)


main()
