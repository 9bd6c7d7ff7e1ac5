"""quantgraph.convert on a whole model: everything but the Q/DQ nodes preserved, idempotent and
deterministic, its input never modified, com.microsoft Q/DQ converted by default, scales computed
in the model inferred (the pass's own tests: tests/passes/test_qdq_to_spec*.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph import DOMAIN
from quantgraph.reference.compare import compare
from tests.builders import (
    BACKENDS,
    differential,
    make_model,
    opsets,
    serialize,
    serialize_node,
    serialize_vi,
    tensor_info,
)
from tests.passes.qdq_models import (
    QDQ,
    Case,
    dq_only,
    f8_dq_model,
    function_model,
    if_model,
)

# -- preservation, idempotence, inputs untouched ------------------------------------------------


def _rich_model() -> onnx.ModelProto:
    x = tensor_info("x", TensorProto.FLOAT, [2, 3])
    x.doc_string = "the input"
    y = tensor_info("y", TensorProto.FLOAT, [2, 3])
    y.doc_string = "the output"
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", doc_string="q doc"),
        helper.make_node(
            "DequantizeLinear", ["q", "s", "z"], ["d"], name="dq0", doc_string="dq doc"
        ),
        helper.make_node("Mul", ["d", "s"], ["m"], name="mul0", doc_string="mul doc"),
        helper.make_node("Add", ["m", "bias"], ["y"], name="add0"),
        helper.make_node("DequantizeLinear", ["b32", "bs"], ["b"], name="bias_dq", axis=0),
        helper.make_node("Identity", ["b"], ["b_out"], name="id0"),
    ]
    model = make_model(
        nodes,
        [x],
        [y, tensor_info("b_out", TensorProto.FLOAT, [3])],
        [
            numpy_helper.from_array(np.array(0.25, np.float32), "s"),
            numpy_helper.from_array(np.array(3, np.uint8), "z"),
            numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias"),
            numpy_helper.from_array(np.array([1, -2, 3], np.int32), "b32"),
            numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "bs"),
        ],
        opset=19,
    )
    model.graph.value_info.extend(
        [
            tensor_info("q", TensorProto.UINT8, [2, 3]),
            tensor_info("d", TensorProto.FLOAT, [2, 3]),
            tensor_info("m", TensorProto.FLOAT, [2, 3]),
        ]
    )
    model.graph.value_info[0].doc_string = "quantized"
    model.producer_name = "hand-built"
    model.producer_version = "9.9"
    model.doc_string = "model doc"
    model.graph.doc_string = "graph doc"
    model.domain = "org.example"
    model.model_version = 7
    helper.set_model_props(model, {"author": "tests", "purpose": "preservation"})
    model.graph.node[0].metadata_props.add(key="origin", value="q0 meta")
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_everything_else_is_preserved(static: bool) -> None:
    model = _rich_model()
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)

    assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert [(s.node, s.op_type) for s in result.report.skipped] == [("bias_dq", "DequantizeLinear")]
    assert "int32" in result.report.skipped[0].reason

    # Node names, order and output names.
    assert [n.name for n in out.graph.node] == [n.name for n in model.graph.node]
    for before, after in zip(model.graph.node, out.graph.node, strict=True):
        assert list(after.output) == list(before.output)
        assert after.doc_string == before.doc_string
        assert list(after.metadata_props) == list(before.metadata_props)
        if before.op_type not in QDQ or before.name == "bias_dq":
            assert serialize_node(after) == serialize_node(before)
    # Initializers the rewrite did not consume stay byte for byte (s is still used by Mul).
    before_inits = {t.name: t.SerializeToString() for t in model.graph.initializer}
    after_inits = {t.name: t.SerializeToString() for t in out.graph.initializer}
    for name in ("s", "bias", "b32", "bs"):
        assert after_inits[name] == before_inits[name]
    # value_info of the original graph is still there, unchanged.
    after_vi = {v.name: serialize_vi(v) for v in out.graph.value_info}
    for value in model.graph.value_info:
        assert after_vi.get(value.name) == serialize_vi(value), value.name
    # Graph interface, model metadata, opsets.
    assert [serialize_vi(v) for v in out.graph.input] == [
        serialize_vi(v) for v in model.graph.input
    ]
    assert [serialize_vi(v) for v in out.graph.output] == [
        serialize_vi(v) for v in model.graph.output
    ]
    assert {p.key: p.value for p in out.metadata_props} == {
        "author": "tests",
        "purpose": "preservation",
    }
    assert (out.producer_name, out.producer_version) == ("hand-built", "9.9")
    assert (out.doc_string, out.graph.doc_string) == ("model doc", "graph doc")
    assert (out.domain, out.model_version, out.ir_version) == ("org.example", 7, model.ir_version)
    assert out.graph.name == model.graph.name
    assert opsets(out) == {"": 19, DOMAIN: 1}

    feed = {"x": np.array([[-1.0, 0.125, 0.375], [10.0, 63.0, 64.5]], np.float32)}
    differential(model, out, [feed])


IDEMPOTENCE_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "pair": lambda: Case(21, "s8", "axis", axis=-1).model(),
    "runtime": lambda: Case(13, "u8", "runtime").model(),
    "rich": _rich_model,
    "if": if_model,
    "function": lambda: function_model(typed=True),
    "float8": lambda: f8_dq_model(TensorProto.FLOAT8E5M2, 21, True),
    "int4": lambda: dq_only(TensorProto.INT4),
}


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", sorted(IDEMPOTENCE_MODELS))
def test_convert_is_idempotent_and_deterministic(name: str, static: bool) -> None:
    model = IDEMPOTENCE_MODELS[name]()
    first = quantgraph.convert(model, static=static)
    again = quantgraph.convert(model, static=static)
    assert serialize(first.proto) == serialize(again.proto), "converting twice differs"
    assert first.report.to_dict() == again.report.to_dict()
    second = quantgraph.convert(first.proto, static=static)
    assert second.report.converted == {}
    assert [(s.node, s.reason) for s in second.report.skipped] == [
        (s.node, s.reason) for s in first.report.skipped
    ]
    assert serialize(second.proto) == serialize(first.proto), "converting a converted model"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_inputs_are_not_modified(tmp_path: Path, static: bool) -> None:
    model = _rich_model()
    path = tmp_path / "model.onnx"
    path.write_bytes(serialize(model))
    digest, stat = _sha256(path), path.stat()
    from_path = quantgraph.convert(path, static=static)
    from_str = quantgraph.convert(str(path), static=static)
    assert _sha256(path) == digest
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert serialize(from_path.proto) == serialize(from_str.proto)

    before = serialize(model)
    from_proto = quantgraph.convert(model, static=static)
    assert serialize(model) == before, "the ModelProto argument was changed"
    assert serialize(from_proto.proto) == serialize(from_path.proto)

    from_bytes = quantgraph.convert(before, static=static)
    assert serialize(from_bytes.proto) == serialize(from_path.proto)

    ir_model = ir.from_proto(model)
    ir_before = serialize(ir.to_proto(ir_model))
    quantgraph.convert(ir_model, static=static)
    assert serialize(ir.to_proto(ir_model)) == ir_before, "the ir.Model argument was changed"


def test_contrib_qdq_converts_by_default_and_agrees() -> None:
    """com.microsoft Q/DQ compute like ONNX's for u8/s8 with f32 scales (issue: converted where
    the spec covers them); the rewrite must agree with onnxruntime's contrib kernels."""
    nodes = [
        helper.make_node(
            "QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", domain="com.microsoft"
        ),
        helper.make_node(
            "DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0", domain="com.microsoft"
        ),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, [4, 6])],
        [tensor_info("y", TensorProto.FLOAT, [4, 6])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "s"),
            numpy_helper.from_array(np.array(3, np.uint8), "z"),
        ],
        domains={"com.microsoft": 1},
    )
    result = quantgraph.convert(model)
    assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert all("com.microsoft" in n.detail for n in result.report.converted_nodes)
    report = quantgraph.validate(model, result.proto, backend="python")
    assert report.agree


# -- computed scales: the converter infers what it needs ------------------------------------------

EXPANDED_CASES = (
    "test_dynamicquantizelinear_expanded",
    "test_dynamicquantizelinear_max_adjusted_expanded",
    "test_dynamicquantizelinear_min_adjusted_expanded",
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", EXPANDED_CASES)
def test_computed_scales_convert_from_the_model_as_shipped(name: str, backend: str) -> None:
    """ONNX's expanded DynamicQuantizeLinear computes its scale and zero point at run time and
    declares neither's shape: the converter infers them itself (on a copy) and leaves the
    model's own value_info as it was."""
    from tools.conformance import MAX_ORT_OPSET, collect_cases

    (case,) = [c for c in collect_cases() if c.name == name]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for opset in model.opset_import:
        if opset.domain == "":
            opset.version = min(opset.version, MAX_ORT_OPSET)
    declared = {v.name: v.SerializeToString() for v in model.graph.value_info}
    result = quantgraph.convert(model)
    assert result.report.skipped == []
    assert result.report.converted == {"QuantizeLinear": 1}
    after = {v.name: v.SerializeToString() for v in result.proto.graph.value_info}
    assert {k: after[k] for k in declared} == declared
    added = set(after) - set(declared)  # only what the rewrite made: a Reshape to [1]
    assert all(n.endswith("_1d") or n.startswith("quantgraph_shape_") for n in added), added
    feeds = {v.name: np.asarray(d) for v, d in zip(model.graph.input, case.inputs, strict=True)}
    outputs = quantgraph.InferenceSession(result.proto, backend).run(None, feeds)
    for got, want in zip(outputs, case.outputs, strict=True):
        assert compare("y", np.asarray(want), np.asarray(got)).agree
