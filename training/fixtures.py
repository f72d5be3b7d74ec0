"""Writes the model fixtures of the agent's tests (neurogc-agent/tests/fixtures/):
constant policies that always pick one action (so act-mode tests know what must happen),
a model with the wrong input shape, and a file that is not ONNX at all.

  python fixtures.py OUT_DIR
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402
import onnx_model  # noqa: E402
from train import ACTIONS, HISTORY  # noqa: E402

F = 25  # feature schema 1


def constant(index, history=HISTORY, n_features=F):
    b2 = np.zeros(len(ACTIONS)); b2[index] = 1.0
    return onnx_model.build(np.zeros((history * n_features, 4)), np.zeros(4), np.zeros((4, len(ACTIONS))), b2,
                            np.zeros(n_features), np.ones(n_features), history, n_features, ACTIONS, 1)


out = sys.argv[1]
for t0 in (700, 25000, 60000):
    onnx.save(constant([a[0] for a in ACTIONS].index(t0)), os.path.join(out, f"always-{t0}.onnx"))
onnx.save(constant(0, n_features=F - 1), os.path.join(out, "wrong-shape.onnx"))
with open(os.path.join(out, "corrupt.onnx"), "wb") as f:
    f.write(b"\x08\x09this is not a protobuf model" * 8)
