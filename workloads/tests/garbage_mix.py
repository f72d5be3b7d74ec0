# Serves: tests: the garbage census against a known composition (tests/census.rs).
"""Cyclic garbage of three kinds in a 3:1:1 mix, for the garbage census's ground truth.

  python garbage_mix.py SECONDS [--thread]

First the truth, measured in-process: with gc.DEBUG_SAVEALL the collector keeps what it would
free in gc.garbage, and the share of each type among it is printed as one JSON line: {"truth":
{"Tok": 0.6, ...}, "since_ns": when the mix begins}. Then, for SECONDS, rounds of three pairs of `Tok` (through `__slots__`: each
one's `parent` is the other), one `Node` (through its `__dict__`: `me` is itself) and one
closure (a function whose cell holds the function), made in a random order: a collection that
falls mid-round promotes what the round has made so far, and in a fixed order that was mostly
`Tok`, which older generations' garbage then over-counted. It ends with os._exit: no collection
of the interpreter's shutdown follows. With --thread the mix runs on a thread of its own.

3.13t's collector waits longer after each collection in a loop that makes only garbage (its
count starts again from minus what the last one freed): each collection would free more than
the last, and the census's walk, which may take half the longest pause, would stop partway.
There the mix collects every 200 rounds itself, as a training loop does.
"""
import collections
import gc
import json
import os
import random
import sys
import threading
import time


class Tok:
    __slots__ = ("parent",)


class Node:
    pass


def pair():
    a, b = Tok(), Tok()
    a.parent, b.parent = b, a


def node():
    n = Node()
    n.me = n


def closure():
    def f():
        return f
    return f


KINDS = [pair, pair, pair, node, closure]


def round_(rng):
    for make in rng.sample(KINDS, len(KINDS)):
        make()


def main():
    rng = random.Random(7)
    collects = not getattr(sys, "_is_gil_enabled", lambda: True)()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    for _ in range(2000):
        round_(rng)
    gc.collect()
    kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
    total = sum(kinds.values())
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    # When the mix begins: collections before it (start-up's) free other things.
    since = time.time_ns()
    print(json.dumps({"truth": {k: v / total for k, v in kinds.items()}, "since_ns": since}), flush=True)
    end = time.time() + float(sys.argv[1])

    def mix():
        while time.time() < end:
            for _ in range(200):
                round_(rng)
            if collects:
                gc.collect()

    if sys.argv[2:] == ["--thread"]:
        # The mix made, and collected, on a thread of its own; the main thread waits.
        worker = threading.Thread(target=mix)
        worker.start()
        worker.join()
    else:
        mix()
    os._exit(0)


main()
