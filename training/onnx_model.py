"""Writes neurogc's policy model as an ONNX graph from numpy weights (no deep-learning framework).

Graph: features [1, H, F] -> Asinh (sign-preserving log scale: rates, pauses and bytes span
decades) -> (x - mean) / std -> reshape [1, H*F] -> Gemm -> Relu -> Gemm -> scores [1, K].
Metadata carries the contract the agent checks: neurogc.schema, neurogc.history, neurogc.actions.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(w1, b1, w2, b2, mean, std, history, n_features, actions, schema, extra_meta=None):
    k = len(actions)
    inits = [
        numpy_helper.from_array(np.asarray(mean, np.float32).reshape(1, 1, n_features), "mean"),
        numpy_helper.from_array(np.asarray(std, np.float32).reshape(1, 1, n_features), "std"),
        numpy_helper.from_array(np.array([1, history * n_features], np.int64), "flat_shape"),
        numpy_helper.from_array(np.asarray(w1, np.float32), "w1"),
        numpy_helper.from_array(np.asarray(b1, np.float32), "b1"),
        numpy_helper.from_array(np.asarray(w2, np.float32), "w2"),
        numpy_helper.from_array(np.asarray(b2, np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("Asinh", ["features"], ["scaled"]),
        helper.make_node("Sub", ["scaled", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["normed"]),
        helper.make_node("Reshape", ["normed", "flat_shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["hidden_pre"]),
        helper.make_node("Relu", ["hidden_pre"], ["hidden"]),
        helper.make_node("Gemm", ["hidden", "w2", "b2"], ["scores"]),
    ]
    graph = helper.make_graph(
        nodes,
        "neurogc_policy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, history, n_features])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, k])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="neurogc-training")
    model.ir_version = 9  # onnxruntime 1.17+ reads it
    meta = {
        "neurogc.schema": str(schema),
        "neurogc.history": str(history),
        "neurogc.actions": ";".join(",".join(str(int(v)) for v in a) for a in actions),
    }
    meta.update(extra_meta or {})
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    return model
