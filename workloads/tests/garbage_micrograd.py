# Serves: tests: the garbage census on third-party code from PyPI (tests/census.rs).
"""micrograd (PyPI) training a small MLP for SECONDS: every operation's result keeps a closure
that refers back to it, so its garbage is cycles of Value, function, cell, set and tuple. Then
the truth, measured in-process with gc.DEBUG_SAVEALL, as one JSON line: {"truth": {...},
"since_ns": when the training began}.

  PYTHONPATH=<held-out site> python garbage_micrograd.py SECONDS
"""
import collections, gc, json, random, sys, time
from micrograd.nn import MLP
rng = random.Random(7)
data = [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(2000)]
model = MLP(8, [16, 16, 1])
def step(i):
    batch = [data[(i * 8 + k) * 7919 % len(data)] for k in range(8)]
    loss = sum(((model(x) - 1.0) ** 2 for x in batch), start=0)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= 0.01 * p.grad
since = time.time_ns()
end = time.time() + float(sys.argv[1])
i = 0
while time.time() < end:
    step(i); i += 1
gc.collect()
gc.set_debug(gc.DEBUG_SAVEALL)
for _ in range(3):
    step(i); i += 1
gc.collect()
kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
total = sum(kinds.values())
gc.set_debug(0); gc.garbage.clear()
print(json.dumps({"truth": {k: v / total for k, v in kinds.items()}, "since_ns": since}), flush=True)
