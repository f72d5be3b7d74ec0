# Serves: benchmarks: the harness every benchmark workload imports (pauses per generation, RSS, recipes).
"""What every benchmark workload does inside itself, the same way in every configuration (with
and without the agent), so that the benchmark can compare them all: pauses per generation timed
by gc.callbacks, peak RSS, and the recipes the agent is compared against.

stats() answers, per generation, [collections, total ns, longest ns since the last stats()].
"""
import gc
import os
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
RECIPES = ("none", "static", "freeze", "freeze-5k", "freeze-20k", "gc-off")


def apply_recipe(recipe):
    """static: the hand-tuned production recipe (after warm-up: freeze the heap, rarer
    collections); freeze: gc.freeze() alone after a full collection; freeze-5k, freeze-20k: the
    same with threshold0 5,000 or 20,000 (the fixed recipes the controller's regret is measured
    against); gc-off: the collector disabled (a bound, not a recipe)."""
    if recipe == "static" or recipe.startswith("freeze"):
        gc.collect()
        gc.freeze()
    if recipe == "static":
        gc.set_threshold(50_000, 20, 20)
    elif recipe in ("freeze-5k", "freeze-20k"):
        _, t1, t2 = gc.get_threshold()
        gc.set_threshold(5_000 if recipe == "freeze-5k" else 20_000, t1, t2)
    elif recipe == "gc-off":
        gc.disable()


def stats_document(served):
    """What GET /stats answers in every service the benchmark drives: requests served, the
    collector's own counts, thresholds and frozen objects, peak RSS, and pauses per generation
    since the last call (see stats())."""
    return {
        "pid": os.getpid(),
        "served": served,
        "gc": gc.get_stats(),
        "thresholds": gc.get_threshold(),
        "freeze_count": gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else None,
        "peak_rss_bytes": peak_rss_bytes(),
        "pauses": stats(),
    }


def serve_wsgi(app, request_queue_size=5):
    """Serves a WSGI application on the standard library's wsgiref, quietly, on a free local
    port; prints "ready PORT" once it listens. request_queue_size: the listen backlog."""
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server_class = type("Server", (WSGIServer,), {"request_queue_size": request_queue_size})
    server = make_server("127.0.0.1", 0, app, server_class=server_class, handler_class=Quiet)
    print("ready %d" % server.server_port, flush=True)
    server.serve_forever()


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_batch(step, on_measuring=None, latency=None):
    """The batch protocol the benchmark drives (workloads/heldout/*): print "ready", read "go
    WARMUP_SECONDS STEPS", run step(i) unmeasured for WARMUP_SECONDS, print "measuring", run STEPS
    timed steps, print "result JSON" (every step's ms, the total, peak RSS, collections and pauses
    per generation over the measured steps), and exit without a shutdown collection.

    on_measuring() runs as the measured part starts; latency(), where given, is what a step's
    ms are instead of its own time (s; a service's request from its arrival)."""
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
    if on_measuring is not None:
        on_measuring()
    print("measuring", flush=True)
    before = stats()
    counts_before = [s["collections"] for s in gc.get_stats()]
    times = []
    start = time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        step(i)
        times.append((latency() if latency else time.perf_counter() - t) * 1e3)
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
