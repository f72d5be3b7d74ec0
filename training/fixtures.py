"""Writes the model fixtures of the agent's tests (neurogc-agent/tests/fixtures/): correctors that
make the act-mode tests' outcome known in advance, a model with the wrong input shape, and a file
that is not ONNX at all.

  python fixtures.py OUT_DIR

- prefer-T0.onnx: the GC share of every candidate is corrected by |ln(t0 / T0)| plus any change of
  threshold 1 or 2 (in ln units), less ln 10: the cheapest action is the grid's threshold0
  nearest T0 within one step, generations 1 and 2 kept. From 700/10/10, prefer-5000 moves once,
  to 5000/10/10, and stays there.
- stay.onnx: every change costs its size in ln units: only a budget moves the controller.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402
import onnx_model  # noqa: E402
from features import FEATURES  # noqa: E402

F = len(FEATURES)
IDX = {name: i for i, name in enumerate(FEATURES)}


def absolute(columns):
    """Hidden units relu(x - c), relu(c - x) per (feature, c): their sum is |x - c|."""
    w = np.zeros((F, 2 * len(columns)))
    b = np.zeros(2 * len(columns))
    for j, (name, c) in enumerate(columns):
        w[IDX[name], 2 * j], b[2 * j] = 1.0, -c
        w[IDX[name], 2 * j + 1], b[2 * j + 1] = -1.0, c
    return w, b


def share_only(hidden, bias):
    w2 = np.zeros((hidden, 4))
    w2[:, 0] = 1.0
    b2 = np.zeros(4)
    b2[0] = bias
    return w2, b2


def prefer(t0):
    w1, b1 = absolute([("ln_t0_700", math.log(t0 / 700)), ("d_ln_t1", 0.0), ("d_ln_t2", 0.0)])
    w2, b2 = share_only(w1.shape[1], -math.log(10))
    return onnx_model.build([(w1, b1), (w2, b2)], np.zeros(F), np.ones(F), FEATURES, f"fixture: prefer {t0}")


def stay():
    w1, b1 = absolute([("d_ln_t0", 0.0), ("d_ln_t1", 0.0), ("d_ln_t2", 0.0), ("freeze_change", 0.0)])
    w2, b2 = share_only(w1.shape[1], 0.0)
    return onnx_model.build([(w1, b1), (w2, b2)], np.zeros(F), np.ones(F), FEATURES, "fixture: stay")


out = sys.argv[1]
for t0 in (5000, 50000):
    onnx.save(prefer(t0), os.path.join(out, f"prefer-{t0}.onnx"))
onnx.save(stay(), os.path.join(out, "stay.onnx"))
# The right feature names over an input one column short.
wrong = onnx_model.build([(np.zeros((F - 1, 4)), np.zeros(4))], np.zeros(F - 1), np.ones(F - 1), FEATURES[:-1],
                         "fixture: wrong shape")
next(m for m in wrong.metadata_props if m.key == "neurogc.features").value = ",".join(FEATURES)
onnx.save(wrong, os.path.join(out, "wrong-shape.onnx"))
with open(os.path.join(out, "corrupt.onnx"), "wb") as f:
    f.write(b"\x08\x09this is not a protobuf model" * 8)
