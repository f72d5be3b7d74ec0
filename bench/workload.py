"""What every benchmark workload does inside itself, the same way in every configuration (with
and without the agent), so that the benchmark can compare them all: pauses per generation timed
by gc.callbacks, peak RSS, and the recipes the agent is compared against.

stats() answers, per generation, [collections, total ns, longest ns since the last stats()].
"""
import gc
import time

_count = [0, 0, 0]
_total = [0, 0, 0]
_max = [0, 0, 0]
_start = [0]


def _callback(phase, info):
    if phase == "start":
        _start[0] = time.perf_counter_ns()
        return
    g = info["generation"]
    d = time.perf_counter_ns() - _start[0]
    _count[g] += 1
    _total[g] += d
    if d > _max[g]:
        _max[g] = d


def install():
    gc.callbacks.append(_callback)


def stats():
    out = [[_count[g], _total[g], _max[g]] for g in range(3)]
    _max[:] = [0, 0, 0]
    return out


# What apply_recipe knows: every workload's --recipe takes one of these.
RECIPES = ("none", "static", "gc-off")


def apply_recipe(recipe):
    """static: the hand-tuned production recipe (after warm-up: freeze the heap, rarer
    collections); gc-off: the collector disabled (a bound, not a recipe)."""
    if recipe == "static":
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    elif recipe == "gc-off":
        gc.disable()


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_batch(step):
    """The batch protocol the benchmark drives (bench/heldout/*): print "ready", read "go
    WARMUP_SECONDS STEPS", run step(i) unmeasured for WARMUP_SECONDS, print "measuring", run STEPS
    timed steps, print "result JSON" (every step's ms, the total, peak RSS, collections and pauses
    per generation over the measured steps), and exit without a shutdown collection."""
    import json
    import os
    import sys

    print("ready", flush=True)
    _, warmup, steps = sys.stdin.readline().split()
    warmup, steps = float(warmup), int(steps)
    i = 0
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        step(i)
        i += 1
    print("measuring", flush=True)
    before = stats()
    counts_before = [s["collections"] for s in gc.get_stats()]
    times = []
    start = time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - t) * 1e3)
        i += 1
    total = time.perf_counter() - start
    after = stats()
    result = {
        "step_ms": times,
        "total_s": total,
        "peak_rss_bytes": peak_rss_bytes(),
        "collections": [s["collections"] - b for s, b in zip(gc.get_stats(), counts_before)],
        "pauses_before": before,
        "pauses": after,
    }
    print("result " + json.dumps(result), flush=True)
    os._exit(0)
