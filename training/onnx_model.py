"""Writes neurogc's learned model as an ONNX graph from numpy weights (no deep-learning
framework), following the agent's "corrector/1" contract (neurogc-agent/src/steering/policy/model.rs):

  candidates [N, F] -> Gemm -> Relu -> ... -> Gemm -> correction [N, 4]

One row per candidate action; the output is ln(measured / predicted) expected for the GC share
and generations 0, 1 and 2's pauses. The layers are trained on standardised inputs,
(x - mean) / std; that is folded into the first Gemm's weights, so a linear model is a single
node: one call a second runs on cold caches, and every kernel it passes through costs tens of
µs there. A constant is one Gemm of zeros.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONTRACT = "corrector/1"
OUTPUTS = ["share", "pause0", "pause1", "pause2"]


def build(layers, mean, std, features, cls, extra_meta=None):
    """layers: [(W [in, out], b [out]), ...], ReLU between them; the last has 4 outputs."""
    n = len(features)
    mean = np.asarray(mean, np.float64).reshape(n)
    std = np.asarray(std, np.float64).reshape(n)
    w0, b0 = (np.asarray(a, np.float64) for a in layers[0])
    # ((x - mean) / std) @ w0 + b0 == x @ (w0 / std) + (b0 - (mean / std) @ w0)
    layers = [(w0 / std[:, None], b0 - (mean / std) @ w0)] + list(layers[1:])
    inits, nodes = [], []
    x = "candidates"
    for i, (w, b) in enumerate(layers):
        inits += [numpy_helper.from_array(np.asarray(w, np.float32), f"w{i}"),
                  numpy_helper.from_array(np.asarray(b, np.float32), f"b{i}")]
        last = i == len(layers) - 1
        out = "correction" if last else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [out if last else f"pre{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"pre{i}"], [out]))
        x = out
    graph = helper.make_graph(
        nodes,
        "neurogc_corrector",
        [helper.make_tensor_value_info("candidates", TensorProto.FLOAT, ["n", n])],
        [helper.make_tensor_value_info("correction", TensorProto.FLOAT, ["n", len(OUTPUTS)])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="neurogc-training")
    model.ir_version = 9  # onnxruntime 1.17+ reads it
    meta = {"neurogc.contract": CONTRACT, "neurogc.features": ",".join(features), "neurogc.class": cls}
    meta.update(extra_meta or {})
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    return model
