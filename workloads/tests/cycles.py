# Serves: tests: the ground truth every observation test counts against (gc.callbacks); also `bench overhead`.
"""Ground-truth workload for neurogc's tests and benchmarks.

Creates cyclic garbage so that the collector runs often, and counts every collection itself with
gc.callbacks. At the end it prints one JSON line with its own counts and exits with os._exit, so
that no shutdown collection (which gc.callbacks never reports) runs after the report.

  python cycles.py [--seconds S | --iterations N] [--threads T] [--wait] [--manual K]
                   [--threshold T0] [--idle-main] [--depth D] [--pauses] [--bare] [--heap N]

--wait: print "ready" and wait for a line on stdin before counting (attach mode).
--idle-main: the main thread only waits for the worker threads (blocked in join).
--depth: the work runs D Python frames deep (a stack for observers that copy stacks).
--pauses: the report lists every collection's pause as the callbacks time it (ns, in order).
--heap: keep N more long-lived containers, so that each full collection takes a while.
"""
import argparse
import gc
import json
import os
import sys
import threading
import time

counts = [0, 0, 0]
collected = [0, 0, 0]
uncollectable = [0, 0, 0]
tids = set()


pauses = []
started_ns = [0]


def on_gc(phase, info):
    # One collection runs at a time (free-threaded builds too: `collecting` is taken first).
    if phase == "start":
        started_ns[0] = time.perf_counter_ns()
        return
    pauses.append(time.perf_counter_ns() - started_ns[0])
    if phase == "stop":
        g = info["generation"]
        counts[g] += 1
        collected[g] += info["collected"]
        uncollectable[g] += info["uncollectable"]
        tids.add(threading.get_native_id())


class Node:
    __slots__ = ("peer", "payload", "__weakref__")

    def __init__(self):
        self.peer = None
        self.payload = None


def churn(iterations, deadline, manual_every, keep_every):
    keep = []
    i = 0
    while (iterations is None or i < iterations) and (deadline is None or time.monotonic() < deadline):
        a, b = Node(), Node()
        a.peer, b.peer = b, a
        a.payload = [a, {"k": b}]
        if keep_every and i % keep_every == 0:
            keep.append((a, b))  # some objects survive into the older generations
            if len(keep) > 2000:
                del keep[:1000]
        if manual_every and i % manual_every == 0:
            gc.collect(i // manual_every % 3)
        i += 1
    return i


def at_depth(depth, work, *args):
    """work(*args), called `depth` frames below here."""
    if depth <= 1:
        return work(*args)
    return at_depth(depth - 1, work, *args)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float)
    p.add_argument("--iterations", type=int)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--wait", action="store_true")
    p.add_argument("--manual", type=int, default=0, help="gc.collect(gen) every K iterations")
    p.add_argument("--threshold", type=int, help="threshold0 to use")
    p.add_argument("--linger", type=float, default=0.0, help="sleep this long after the report")
    p.add_argument("--still", action="store_true", help="end with a full collection, then report "
                   "the old generation's size and the counts, which --linger then leaves as they are")
    p.add_argument("--idle-main", action="store_true", help="the main thread only joins the workers")
    p.add_argument("--depth", type=int, default=1, help="run the work this many frames deep")
    p.add_argument("--pauses", action="store_true", help="report every pause the callbacks timed")
    p.add_argument("--bare", action="store_true", help="keep nothing: collections find a near-empty "
                   "heap and are short, so that with --manual 1 threads enter the collector together")
    p.add_argument("--heap", type=int, default=0, help="keep this many more long-lived containers")
    p.add_argument("--freeze-cycle", type=float, default=0.0, help="after the report, hold still "
                   "this long, then gc.freeze() and hold, then gc.unfreeze() and hold")
    args = p.parse_args()
    heap = [[None] for _ in range(args.heap)]  # noqa: F841 (kept alive until the exit)
    if args.threshold:
        t = gc.get_threshold()
        gc.set_threshold(args.threshold, t[1], t[2])
    if args.wait:
        print("ready", json.dumps(list(gc.get_threshold())), flush=True)
        if not sys.stdin.readline():
            os._exit(1)  # whoever started us is gone: do not run on unattended
    # No collection may fall between the baseline and the callback: an observer that read its
    # own count while we waited for "go" sees exactly what the callback counts from here on.
    if args.pauses:
        # A thread that waits 5 ms for the GIL asks for it; during a long collection one nearly
        # always has, and the "stop" callback hands it over before reading the clock, adding a
        # switch (5 ms or more) to the pause timed here but not to the collector's own.
        sys.setswitchinterval(0.5)
    enabled = gc.isenabled()
    gc.disable()
    stats = gc.get_stats()
    baseline = [s["collections"] for s in stats]
    baseline_collected = [s["collected"] for s in stats]
    gc.callbacks.append(on_gc)
    if enabled:
        gc.enable()
    keep_every = 0 if args.bare else 97
    started = time.monotonic()
    deadline = started + args.seconds if args.seconds else None
    workers = [
        threading.Thread(target=churn, args=(args.iterations, deadline, args.manual, keep_every))
        for _ in range(args.threads)
    ]
    for w in workers:
        w.start()
    n = 0 if args.idle_main else at_depth(args.depth, churn, args.iterations, deadline, args.manual, keep_every)
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    gc.disable()  # nothing may collect between the report and the exit
    gc.callbacks.remove(on_gc)
    report = {
        "pid": os.getpid(),
        "version": sys.version.split()[0],
        "baseline_collections": baseline,
        "baseline_collected": baseline_collected,
        "collections": counts,
        "collected": collected,
        "uncollectable": uncollectable,
        "gc_threads": sorted(tids),
        "threads": sorted([threading.main_thread().native_id] + [w.native_id for w in workers]),
        "iterations": n,
        "elapsed_s": elapsed,
        "thresholds": list(gc.get_threshold()),
    }
    if args.pauses:
        report["pause_ns"] = pauses
    if args.still:
        # Twice: 3.14+ untracks some survivors of the first one lazily, after its count.
        gc.collect()
        gc.collect()
        report["old_generation"] = len(gc.get_objects(2))
        report["counts"] = list(gc.get_count())
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if args.freeze_cycle:
        time.sleep(args.freeze_cycle)
        gc.freeze()
        time.sleep(args.freeze_cycle)
        gc.unfreeze()
        time.sleep(args.freeze_cycle)
    if args.linger:
        time.sleep(args.linger)
    os._exit(0)


main()
