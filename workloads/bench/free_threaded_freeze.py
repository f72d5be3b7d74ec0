# Serves: benchmarks: what gc.freeze() does on 3.13t (docs/limits.md).
"""What gc.freeze() does to a free-threaded build's collections (docs/limits.md).

A cache of cyclic objects, then N seconds of cyclic garbage; prints the collections, their mean
pause and the GC share of wall time, timed by gc.callbacks.

  python3.13t workloads/bench/free_threaded_freeze.py none|freeze [THRESHOLD0] [--cache N] [--seconds S]

On 3.13t frozen objects are still visited by the heap walk but not marked, and they leave
long_lived_total, so the trigger long_lived_total / 4 falls back to threshold0.
"""
import argparse
import gc
import sys
import time


class Node:
    __slots__ = ("a", "d", "__weakref__")

    def __init__(self):
        self.a = [self]
        self.d = {"k": self}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["none", "freeze"])
    p.add_argument("threshold0", type=int, nargs="?")
    p.add_argument("--cache", type=int, default=400_000)
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args()
    cache = [Node() for _ in range(args.cache)]
    gc.collect()
    if args.mode == "freeze":
        gc.freeze()
    if args.threshold0:
        t = gc.get_threshold()
        gc.set_threshold(args.threshold0, t[1], t[2])
    count, total, started = [0], [0.0], [0.0]

    def timed(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            count[0] += 1
            total[0] += time.perf_counter() - started[0]

    gc.callbacks.append(timed)
    begin = time.perf_counter()
    end = begin + args.seconds
    while time.perf_counter() < end:
        a, b = Node(), Node()
        a.a.append(b)
        b.a.append(a)
    wall = time.perf_counter() - begin
    gc.callbacks.remove(timed)
    free = "" if getattr(sys, "_is_gil_enabled", lambda: True)() else " (free-threaded)"
    print(
        f"{sys.version.split()[0]}{free} {args.mode} threshold0 {gc.get_threshold()[0]}: "
        f"{count[0]} collections, mean {total[0] * 1e3 / max(count[0], 1):.1f} ms, "
        f"GC {100 * total[0] / wall:.1f}% of {wall:.1f} s (cache {len(cache)})"
    )


main()
