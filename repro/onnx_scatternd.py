"""Reproducer (ONNX importer): ScatterND is not supported. torch.onnx.export writes it for
in-place index writes; in the zoo (benchmarks/zoo.py) OPT and BLOOM (transformers) stop there
on the ONNX path (their causal-mask construction, `mask[..., :n] = ...`):

    UnsupportedOpError: 1 unsupported ONNX operator type: ScatterND (1 node, first 'ScatterND')

    PYTHONPATH=. python repro/onnx_scatternd.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper

import compiler

node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["out"])
graph = helper.make_graph(
    [node], "scatternd",
    [helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 3]),
     helper.make_tensor_value_info("updates", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 3])],
    initializer=[helper.make_tensor("indices", TensorProto.INT64, [2, 1], [3, 0])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
data, updates = np.zeros((4, 3), np.float32), np.ones((2, 3), np.float32)
m = compiler.compile(model, [data, updates])
print(m(data, updates))
