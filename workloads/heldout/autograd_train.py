# Serves: benchmarks, evaluation family (held out: micrograd from PyPI).
"""Held-out evaluation family (never used to tune the controller): a training loop on a
third-party pure-Python autograd library, micrograd (PyPI, pinned by xtask). Every operation's
result keeps a closure that refers back to it: each step's graph is cyclic garbage.

Long-lived state as a training process has it: a dataset of --rows examples held in memory
(lists and dicts, ≈ 3 tracked containers each) and the model's parameters. Every step runs a
small MLP forward and backward over a mini-batch and updates the parameters (SGD).

  python autograd_train.py [--rows N] [--batch B] [--recipe none|static|gc-off]

Protocol as workloads/tuning/batch_job.py: prints "ready", reads "go WARMUP_SECONDS STEPS", runs unmeasured
steps for WARMUP_SECONDS, prints "measuring", runs STEPS steps, prints "result JSON".
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from micrograd.nn import MLP  # noqa: E402

import workload  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=150_000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    args = ap.parse_args()
    rng = random.Random(7)
    data = [{"x": [rng.uniform(-1, 1) for _ in range(8)], "y": [rng.choice((-1.0, 1.0))]} for _ in range(args.rows)]
    # micrograd draws its initial weights from the global generator: seeded, every run trains
    # the same way (unseeded, one run in a few dozen diverged until a weight overflowed, 3000
    # steps from seed 7 do not).
    random.seed(7)
    model = MLP(8, [16, 16, 1])
    workload.install()
    workload.apply_recipe(args.recipe)

    def step(i):
        batch = [data[(i * args.batch + k) * 7919 % args.rows] for k in range(args.batch)]
        loss = sum(((model(row["x"]) - row["y"][0]) ** 2 for row in batch), start=0)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data -= 0.01 * p.grad
        return loss.data

    workload.run_batch(step)


if __name__ == "__main__":
    main()
