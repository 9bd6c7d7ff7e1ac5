"""A model handed to onnxruntime with its weights by reference (fusion auto's candidates timed
in-process): weights in external data are read where they lie (no copy, no file written),
large weights made in memory are not copied into the protobuf, packed 4-bit weights go as
their packed bytes (a view of the file where it reaches far enough, else read), small ones are
serialized; the session computes what onnxruntime computes on the file itself."""

from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from quantgraph.ir.model_files import load_model
from quantgraph.runtime import weights_by_reference


def _model(folder: Path) -> Path:
    """y = (x @ w_external) + b_small, and x @ DequantizeLinear(int4 weight) beside it, twice:
    p first in the data file (its logical size in bytes reaches into w), q last."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 300)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.ones(300, np.float32), "b")
    q = numpy_helper.from_array(rng.integers(-8, 8, (64, 300)).astype(ml_dtypes.int4), "q")
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    p = numpy_helper.from_array(rng.integers(-8, 8, (64, 300)).astype(ml_dtypes.int4), "p")
    nodes = [
        helper.make_node("DequantizeLinear", ["p", "s"], ["dp"]),
        helper.make_node("MatMul", ["x", "dp"], ["v"]),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
        helper.make_node("DequantizeLinear", ["q", "s"], ["dq"]),
        helper.make_node("MatMul", ["x", "dq"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 300]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 300]),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 300]),
        ],
        [p, w, b, q, s],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    folder.mkdir()
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="model.data", size_threshold=4096)
    return path


def test_external_weights_are_read_where_they_lie(tmp_path: Path) -> None:
    path = _model(tmp_path / "model")
    loaded = load_model(path)
    before = {name: v.const_value for name, v in loaded.graph.initializers.items()}
    external = {n for n, t in before.items() if isinstance(t, ir.ExternalTensor)}
    assert external == {"w", "q", "p"}
    reference = ir.external_data.load_to_model(loaded.clone())  # every weight in memory
    for model in (loaded, reference):  # a weight made in memory, above SMALLEST, and one unused
        made = ir.Value(name="big", const_value=ir.tensor(np.full((300, 64), 0.5, np.float32)))
        model.graph.register_initializer(made)
        y = next(v for v in model.graph.outputs if v.name == "y")
        more = ir.Node("", "MatMul", [y, made], name="more")
        more.outputs[0].name = "u"
        more.outputs[0].dtype = ir.DataType.FLOAT
        model.graph.append(more)
        model.graph.outputs.append(more.outputs[0])
        dead = ir.tensor(np.zeros((300, 300), np.float32))
        model.graph.register_initializer(ir.Value(name="dead", const_value=dead))
    options = ort.SessionOptions()
    options.log_severity_level = 4
    scratch = os.listdir(tmp_path / "model")
    source = weights_by_reference.source(loaded, options)
    assert os.listdir(tmp_path / "model") == scratch  # nothing written
    # no weight is in the protobuf but the small bias
    assert len(source.model) < 4096
    arrays = [a for a in source.held if isinstance(a, np.ndarray)]
    assert len(arrays) == 4
    views = {(*a.shape, a.dtype.itemsize): a for a in arrays}
    w, big = views[(64, 300, 4)], views[(300, 64, 4)]
    assert not w.flags.writeable and not w.flags.owndata  # a view of its file
    assert big.flags.writeable and not big.flags.owndata  # the array made in memory
    int4 = [a for a in arrays if a.dtype == np.uint8]
    assert [a.shape for a in int4] == [(64, 300)] * 2
    assert not int4[0].flags.writeable  # p: a view of the file, which reaches on into w
    assert int4[1].flags.writeable  # q, last in the file: read into an array of its own
    kept = {"big", "dead"}
    assert {n: v.const_value for n, v in loaded.graph.initializers.items() if n not in kept} == (
        before
    )
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    got = ort.InferenceSession(source.model, options).run(None, {"x": x})
    serialized = ir.to_proto(reference).SerializeToString()
    want = ort.InferenceSession(serialized).run(None, {"x": x})
    assert len(got) == 4
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
