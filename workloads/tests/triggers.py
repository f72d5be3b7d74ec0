# Serves: tests: where collections start (stacks, report sites).
"""Collections triggered at known places, for the stack tests.

    triggers.py ratio SECONDS   alpha() and beta() allocate cyclic garbage 3:1 (random order,
                                so no threshold can alias the pattern), for SECONDS
    triggers.py depth N         gc.collect() at the bottom of an N-deep recursion
    triggers.py cells SECONDS   closure() makes a cell in its prologue (no line of its own), and
                                a list and a function in its body that hold it: cyclic garbage
    triggers.py reuse N         N functions phase_0 … phase_N-1 made one after another with exec,
                                each allocating for 1.5 s then freed: their code objects reuse
                                one address (printed as "code ADDRESS")

Each mode waits for a line on stdin first (the agent arms while it waits), prints "ready"
before waiting, and "done" at the end. Line numbers below are part of the test: the test reads
them from this file's own "# line:" markers.
"""
import gc
import random
import sys
import time


class Node:
    def __init__(self):
        self.me = self


def alpha():
    Node()  # line: alpha


def beta():
    Node()  # line: beta


def ratio(seconds):
    rnd = random.Random(7)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(1000):
            if rnd.random() < 0.75:
                alpha()
            else:
                beta()


# A cycle each call (list, function, cell): net allocations grow, so collections start here.
def closure():  # line: closure-def
    held = []
    held.append(lambda: held)  # line: closure-body


def cells(seconds):
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(1000):
            closure()


def deep(n):
    if n == 0:
        gc.collect()  # line: collect
        return
    deep(n - 1)  # line: recurse


def reuse(phases):
    for k in range(phases):
        ns = {"Node": Node, "time": time}
        exec(f"def phase_{k}(t):\n    end = time.time() + t\n    while time.time() < end:\n        Node()\n", ns)
        phase = ns[f"phase_{k}"]
        print("code", hex(id(phase.__code__)), flush=True)
        phase(1.5)
        del phase, ns
        gc.collect()


def main():
    mode, arg = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "ratio":
        ratio(float(arg))
    elif mode == "cells":
        cells(float(arg))
    elif mode == "reuse":
        reuse(int(arg))
    else:
        sys.setrecursionlimit(10_000)
        deep(int(arg))  # line: main
    print("done", flush=True)
    # The agent names frames from this process's memory after the collection: stay a moment.
    time.sleep(1)


main()
