# Serves: tests: the garbage census against a known composition (tests/census.rs).
"""Cyclic garbage of three kinds in a 3:1:1 mix, for the garbage census's ground truth.

  python garbage_mix.py SECONDS

For SECONDS, each round leaves three pairs of `Tok` (through `__slots__`: each one's `parent`
is the other), one `Node` (through its `__dict__`: `me` is itself) and one closure (a function
whose cell holds the function). Then the truth, measured in-process: with gc.DEBUG_SAVEALL the
collector keeps what it would free in gc.garbage, and the share of each type among it is printed
as one JSON line: {"truth": {"Tok": 0.5, ...}}.
"""
import collections
import gc
import json
import sys
import time


class Tok:
    __slots__ = ("parent",)


class Node:
    pass


def closure():
    def f():
        return f
    return f


def round_():
    for _ in range(3):
        a, b = Tok(), Tok()
        a.parent, b.parent = b, a
    n = Node()
    n.me = n
    closure()


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        for _ in range(200):
            round_()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    for _ in range(2000):
        round_()
    gc.collect()
    kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
    total = sum(kinds.values())
    gc.set_debug(0)
    gc.garbage.clear()
    print(json.dumps({"truth": {k: v / total for k, v in kinds.items()}}), flush=True)


main()
