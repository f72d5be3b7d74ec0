# Serves: training: the exploration workloads the model is trained on (`cargo xtask train`).
"""Exploration workloads for training the learned model of the collector: a parameterised
generator over the families neurogc meets, run under randomised GC actions.

  python generator.py FAMILY --seed SEED [--seconds S] [--hold H]   (SEED: any text, e.g. "3.12-0")

Families (the shape of GC load; every size and rate is drawn from the seed):
  service-cyclic   warm heap of long-lived containers, requests at a Poisson rate, each
                   leaving reference cycles behind
  service-acyclic  warm heap, requests build nested lists and dicts alive until the response
                   (64 in flight)
  batch            a training-like loop: every op's closure makes a cycle, a long-lived heap
  memory           cyclic garbage that holds large untracked buffers (bytes)
  phases           the service and the batch loop alternating every few seconds
  threads          two to four threads serving requests against one shared heap

Every 0.75–1.75 s (seeded; `--hold H` scales that to 0.6–1.4 H) the process sets its own thresholds, drawn from the controller's grid,
and at some of those moments freezes its heap (gc.freeze()) or undoes its freeze
(gc.unfreeze()). An observing agent records the thresholds it reads from the interpreter's state
with every window, and whether the permanent generation holds objects, so the recording holds
what each action did from each state, frozen or not: the training data. Held long (`--hold 12`),
an action shows what it does to RSS over a good part of the minute the agent's memory prediction
is for, which a change every second cannot. No freeze on 3.12,
whose collector moves immortal objects into the permanent generation: there the observer cannot
tell a freeze, and only thresholds are explored.

Nothing here is a bench/ workload or shares code with one: held-out evaluation stays held out.
"""
import argparse
import collections
import gc
import json
import os
import random
import sys
import threading
import time

FAMILIES = ["service-cyclic", "service-acyclic", "batch", "memory", "phases", "threads"]
T0 = [700, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
T1 = [10, 20, 50]
T2 = [10, 20, 100]


class Cell:
    __slots__ = ("a", "b", "__weakref__")

    def __init__(self, a=None, b=None):
        self.a, self.b = a, b


def build_heap(rng, n):
    """n long-lived containers: dicts of tuples and lists, as a cache or model state holds."""
    return {i: (str(i), [i, i + 1], {"v": i}) for i in range(n)}


def request_cyclic(rng, heap, size):
    nodes = [Cell() for _ in range(size)]
    for i, c in enumerate(nodes):
        c.a = nodes[i - 1]
        c.b = {"n": i}
    heap[rng.randrange(len(heap))] = (str(size), [size], {"v": size})
    return len(nodes)


def request_acyclic(rng, heap, size, inflight=collections.deque(maxlen=64)):
    """A document alive until its response is sent: the last 64 requests' are in flight."""
    doc = {"items": [{"i": i, "tags": [i, str(i)], "pos": (i, i)} for i in range(size)]}
    inflight.append(doc)
    return sum(len(d["tags"]) for d in doc["items"])


def op_batch(rng, params, width):
    """One autograd-like op: a closure that references its output (a cycle per op)."""
    out = Cell()

    def backward():
        return out, params

    out.a = backward
    out.b = [rng.random() for _ in range(width)]
    return out


def request_memory(rng, heap, size):
    """Cycles that each hold a 2 KiB buffer the thresholds do not count: deferring their
    collection costs memory, not time."""
    for _ in range(max(1, size // 4)):
        a, b = Cell(), Cell()
        a.a, b.a = b, a
        a.b = bytes(2048)
    return size


# At a change, the chance that it freezes the heap (when not frozen) or undoes the freeze (when
# frozen): a freeze holds about 3 changes, and about a third of the changes are frozen.
FREEZE, UNFREEZE = 0.15, 0.35
# 3.12's permanent generation holds immortal objects too: an observer cannot see a freeze there.
FREEZES = sys.version_info[:2] != (3, 12)


class Explorer:
    """The randomised actions: the process sets its own thresholds, and freezes its heap or undoes
    that freeze."""

    def __init__(self, rng, scale):
        self.rng = rng
        # The time between actions: 0.75-1.75 s times `scale`.
        self.scale = scale
        self.next = time.monotonic() + rng.uniform(0.75, 1.75) * scale
        self.changes = 0
        self.freezes = 0
        self.frozen = False

    def tick(self):
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.rng.uniform(0.75, 1.75) * self.scale
        self.changes += 1
        gc.set_threshold(self.rng.choice(T0), self.rng.choice(T1), self.rng.choice(T2))
        # Not in the first changes: the observer's first windows see the heap unfrozen (the
        # transitions are read from a window's state to the next). At once, never after a
        # gc.collect(): that one-off collection would count as the frozen setting's pause.
        if FREEZES and not self.frozen and self.changes > 2 and self.rng.random() < FREEZE:
            gc.freeze()
            self.frozen = True
            self.freezes += 1
        elif self.frozen and self.rng.random() < UNFREEZE:
            gc.unfreeze()
            self.frozen = False


def poisson_wait(rng, rate, deadline):
    """Open-loop arrivals: sleep until the next one (never past the deadline)."""
    time.sleep(max(0.0, min(rng.expovariate(rate), deadline - time.monotonic())))


def serve(rng, explorer, heap, request, rate, size, deadline, lock=None):
    done = 0
    while time.monotonic() < deadline:
        poisson_wait(rng, rate, deadline)
        if lock is None:
            explorer.tick()
            request(rng, heap, size)
        else:
            with lock:
                explorer.tick()
                request(rng, heap, size)
        done += 1
    return done


def train(rng, explorer, state, width, deadline):
    steps = 0
    while time.monotonic() < deadline:
        explorer.tick()
        graph = [op_batch(rng, state, width) for _ in range(rng.randrange(200, 800))]
        state[steps % len(state)] = (len(graph), [steps])
        steps += 1
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=FAMILIES)
    ap.add_argument("--seed", required=True)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hold", type=float, default=1.25, help="mean seconds between actions (default 1.25)")
    args = ap.parse_args()
    rng = random.Random(f"{args.family}/{args.seed}")
    params = {
        "heap": rng.choice([50_000, 150_000, 400_000, 800_000]),
        "rate": rng.choice([50, 200, 800]),
        "size": rng.choice([20, 100, 400]),
        "width": rng.choice([4, 16, 64]),
        "threads": rng.randrange(2, 5),
    }
    started = time.monotonic()
    heap = build_heap(rng, params["heap"])
    if not 0.1 <= args.hold <= 600:
        ap.error("--hold: between 0.1 and 600 seconds")
    explorer = Explorer(rng, args.hold / 1.25)
    deadline = started + args.seconds
    fam = args.family
    work = 0
    if fam == "service-cyclic":
        work = serve(rng, explorer, heap, request_cyclic, params["rate"], params["size"], deadline)
    elif fam == "service-acyclic":
        work = serve(rng, explorer, heap, request_acyclic, params["rate"], params["size"], deadline)
    elif fam == "memory":
        work = serve(rng, explorer, heap, request_memory, params["rate"], params["size"], deadline)
    elif fam == "batch":
        work = train(rng, explorer, heap, params["width"], deadline)
    elif fam == "phases":
        while time.monotonic() < deadline:
            until = min(deadline, time.monotonic() + rng.uniform(2.0, 6.0))
            if rng.random() < 0.5:
                work += serve(rng, explorer, heap, request_cyclic, params["rate"], params["size"], until)
            else:
                work += train(rng, explorer, heap, params["width"], until)
    elif fam == "threads":
        lock = threading.Lock()
        counts = []

        def worker(seed):
            r = random.Random(seed)
            counts.append(serve(r, explorer, heap, request_cyclic, params["rate"] / 2, params["size"],
                                deadline, lock))

        pool = [threading.Thread(target=worker, args=(f"{args.seed}/{i}",)) for i in range(params["threads"])]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        work = sum(counts)
    print(json.dumps({"family": fam, "seed": args.seed, "params": params, "work": work,
                      "actions": explorer.changes, "freezes": explorer.freezes,
                      "elapsed_s": round(time.monotonic() - started, 2)}))
    os._exit(0)


if __name__ == "__main__":
    main()
