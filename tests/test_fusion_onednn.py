"""Fusion with oneDNN Graph partitions (issue #24).

The translation of a rewritten model into the partition description is checked without the
C++ side: static forms of the spec ops, constant weights, the int32 bias folded once,
Wildcards where oneDNN has no faithful op, the reasons a spec op is kept out. The plan and the
fused runs need libquantgraph_onednn with the partition ABI (skipped, with why, without it):
each fused model stays within one quantization step of fusion "none" on the onednn backend
(oneDNN's unfused composition of the same ops).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import producers
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.fusion import FusionPlan, auto_engine, onednn_engine
from quantgraph.fusion import onednn_description as description
from quantgraph.fusion.onednn_engine import (
    NO_PARTITION,
    PARTITION_OP,
    SUBGRAPH,
    Candidate,
    _infer_shapes,
)
from quantgraph.fusion.onednn_translate import (
    DYNAMIC_SCALES,
    END,
    PER_CHANNEL_ZPS,
    SPEC,
    WEIGHT_ZPS,
    WILDCARD,
    Translation,
    translate,
)

ROOT = Path(__file__).resolve().parent.parent


def _translated(
    model: onnx.ModelProto | Path, version: tuple[int, int, int] = (3, 2, 0)
) -> Translation:
    converted = quantgraph.convert(model).model
    _infer_shapes(converted)
    return translate(converted, version)


def _text(t: Translation) -> str:
    return description.text(sorted(t.tensors.values(), key=lambda x: x.id), t.ops)


def _by_node(t: Translation) -> dict[str, description.Op]:
    return {t.nodes[o.id].name or "": o for o in t.ops if o.id in t.nodes}


def _floats(values: tuple[object, ...]) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# -- the description text ----------------------------------------------------------------------


def test_lines_follow_the_contract() -> None:
    tensors = [
        description.Tensor(0, "u8", False, (1, None, 4)),
        description.Tensor(1, "s8", True, (8, 3)),
        description.Tensor(2, "f32", False, None),
    ]
    op = description.Op(
        3,
        "Dequantize",
        (0,),
        (2,),
        (
            ("qtype", description.string("per_tensor")),
            ("scales", description.floats([0.1])),
            ("zps", description.ints([128])),
            ("transpose_b", description.boolean(True)),
        ),
    )
    assert description.text(tensors, [op], [0], [2]) == (
        "qgpart 1\n"
        "tensor 0 u8 var 1,?,4\n"
        "tensor 1 s8 const 8,3\n"
        "tensor 2 f32 var -\n"
        "op 3 Dequantize in=0 out=2 qtype=s:per_tensor scales=f:0x1.99999a0000000p-4 "
        "zps=i:128 transpose_b=b:1\n"
        "inputs 0\n"
        "outputs 2\n"
    )
    # float.hex of the float32 value: the C++ side reads the same bits back with strtof.
    assert np.float32(float.fromhex("0x1.99999a0000000p-4")) == np.float32(0.1)
    with pytest.raises(ValueError, match="string attribute"):
        description.string("two words")


# -- translation of real models ----------------------------------------------------------------


def test_the_bundled_cnn_becomes_static_ops_conv_and_folded_bias() -> None:
    t = _translated(ROOT / "models" / "cnn_u8.onnx")
    kinds = [o.kind for o in t.ops]
    assert kinds.count("Convolution") == 2 and kinds.count("MatMul") == 1
    assert "DynamicQuantize" not in kinds and "DynamicDequantize" not in kinds
    assert kinds[-1] == "Wildcard" and t.roles[t.ops[-1].id] == END  # the graph output
    ops = _by_node(t)
    conv = ops["conv1"]
    assert dict(conv.attrs)["pads_begin"] == ("i", (1, 1))
    assert dict(conv.attrs)["data_format"] == ("s", ("NCX",))
    assert dict(conv.attrs)["weights_format"] == ("s", ("OIX",))
    _, weight, bias = conv.inputs
    assert t.tensors[weight].dtype == "f32"  # the weight's Dequantize output
    weight_dq = next(o for o in t.ops if weight in o.outputs)
    assert weight_dq.kind == "Dequantize" and t.tensors[weight_dq.inputs[0]].const
    assert t.tensors[weight_dq.inputs[0]].dtype == "s8"
    assert dict(weight_dq.attrs)["qtype"] == ("s", ("per_channel",))
    # The int32 bias: an f32 constant computed once, as DequantizeLinear computes it.
    assert t.tensors[bias] == description.Tensor(bias, "f32", True, (8,))
    model = onnx.load(ROOT / "models" / "cnn_u8.onnx")
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    expected = (
        init["conv1_b_quantized"].astype(np.int64) - init["conv1_b_quantized_zero_point"]
    ).astype(np.float32) * init["conv1_b_quantized_scale"]
    np.testing.assert_array_equal(t.folded[bias], expected)
    # The fc Gemm (transB=1) is a MatMul with its bias, the Flatten a StaticReshape.
    fc = ops["fc"]
    assert dict(fc.attrs)["transpose_b"] == ("b", (1,)) and len(fc.inputs) == 3
    assert ops["flatten"].kind == "StaticReshape"
    assert dict(ops["flatten"].attrs)["shape"] == ("i", (0, -1))
    assert ops["gap"].kind == "ReduceMean"
    assert ops["pool1"].kind == "MaxPool"
    # Scales are the model's float32 values, exactly.
    q = ops["input_QuantizeLinear"]
    assert q.kind == "Quantize"
    assert _floats(dict(q.attrs)["scales"][1]) == init["input_scale"]
    assert dict(q.attrs)["zps"][1] == (int(init["input_zero_point"]),)
    assert not t.reasons


def test_translation_is_deterministic_and_ids_are_unique() -> None:
    first = _text(_translated(ROOT / "models" / "transformer_s8.onnx"))
    assert first == _text(_translated(ROOT / "models" / "transformer_s8.onnx"))
    t = _translated(ROOT / "models" / "transformer_s8.onnx")
    assert len({o.id for o in t.ops}) == len(t.ops)
    produced = [i for o in t.ops for i in o.outputs]
    assert len(produced) == len(set(produced))  # one producer per logical tensor
    kinds = {o.kind for o in t.ops}
    assert {"MatMul", "Quantize", "Dequantize"} <= kinds


def test_every_node_of_the_transformer_is_an_op_or_a_wildcard() -> None:
    converted = quantgraph.convert(ROOT / "models" / "transformer_u8.onnx").model
    _infer_shapes(converted)
    t = translate(converted)
    seen = {id(n) for n in t.nodes.values()} | {id(n) for n in t.folded_nodes.values()}
    for node in converted.graph:
        assert id(node) in seen or node.op_type == "Constant", node.name
    wildcards = {t.nodes[o.id].op_type for o in t.ops if t.roles[o.id] == WILDCARD}
    assert wildcards and not wildcards & {"Conv", "MatMul", "Relu", "Softmax"}


def _single(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    shape: list[int],
    out: list[int],
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _qdq_conv(weight_zp: list[int]) -> onnx.ModelProto:
    """x -> Q/DQ u8 -> Conv(DQ(s8 per-channel weight with ``weight_zp``)) -> y."""
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "s"),
        numpy_helper.from_array(np.array(128, np.uint8), "z"),
        numpy_helper.from_array(np.arange(2 * 3 * 9, dtype=np.int8).reshape(2, 3, 3, 3), "w"),
        numpy_helper.from_array(np.array([0.01, 0.02], np.float32), "ws"),
        numpy_helper.from_array(np.array(weight_zp, np.int8), "wz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="wdq", axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv"),
    ]
    return _single(nodes, inits, [1, 3, 5, 5], [1, 2, 3, 3])


def test_per_channel_non_zero_weight_zero_points_are_kept_out() -> None:
    t = _translated(_qdq_conv([3, -2]))
    assert t.reasons == {"wd": PER_CHANNEL_ZPS}
    assert _by_node(t)["wdq"].kind == "Wildcard"
    assert _by_node(t)["conv"].kind == "Convolution"  # the compute stays an op
    assert not _translated(_qdq_conv([0, 0])).reasons


def test_non_zero_per_tensor_weight_zero_points_are_kept_out() -> None:
    model = _qdq_conv([0, 0])
    for init in model.graph.initializer:
        if init.name in ("ws", "wz"):
            value = np.array(0.01, np.float32) if init.name == "ws" else np.array(5, np.int8)
            init.CopyFrom(numpy_helper.from_array(value, init.name))
    assert _translated(model).reasons == {"wd": WEIGHT_ZPS}


def test_scales_computed_at_run_time_stay_spec_ops() -> None:
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], name="max", keepdims=0),
        helper.make_node("Div", ["m", "c"], ["s"], name="scale"),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], name="dq"),
    ]
    inits = [
        numpy_helper.from_array(np.array(127, np.float32), "c"),
        numpy_helper.from_array(np.array(0, np.int8), "z"),
    ]
    t = _translated(_single(nodes, inits, [2, 4], [2, 4]))
    assert set(t.reasons.values()) == {DYNAMIC_SCALES}
    assert len(t.reasons) == 2


def test_ops_outside_what_onednn_expresses_are_wildcards() -> None:
    inits = [
        numpy_helper.from_array(np.ones((4, 4), np.float32), "w"),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w"], ["g"], name="gemm_alpha", alpha=2.0),
        helper.make_node("Gemm", ["g", "w"], ["g2"], name="gemm", transB=1),
        helper.make_node("Clip", ["g2", "lo", "hi"], ["c"], name="clip"),
        helper.make_node("Flatten", ["c"], ["f"], name="flat2", axis=2),
        helper.make_node("Transpose", ["f"], ["y"], name="t"),
    ]
    model = ir.from_proto(_single(nodes, inits, [2, 4], [1, 8]))
    _infer_shapes(model)
    t = translate(model)
    ops = _by_node(t)
    assert ops["gemm_alpha"].kind == "Wildcard"
    assert ops["gemm"].kind == "MatMul" and dict(ops["gemm"].attrs)["transpose_b"] == ("b", (1,))
    assert ops["clip"].kind == "Clamp"
    assert dict(ops["clip"].attrs)["min"][1] == (0.0,)
    assert dict(ops["clip"].attrs)["max"][1] == (6.0,)
    assert ops["flat2"].kind == "Wildcard"
    assert ops["t"].kind == "StaticTranspose" and dict(ops["t"].attrs)["order"] == ("i", (1, 0))


def test_int4_weights_need_onednn_3_7() -> None:
    model = producers.weight_only(56, 16, False)
    old = _translated(model)
    assert old.reasons and all("needs oneDNN v3.7+" in r for r in old.reasons.values())
    new = _translated(model, (3, 13, 2))
    dynamic = [o for o in new.ops if o.kind == "DynamicDequantize"]
    assert dynamic and all(dict(o.attrs)["qtype"] == ("s", ("per_group",)) for o in dynamic)
    assert all(new.tensors[o.inputs[0]].dtype == "u4" for o in dynamic)
    assert all(new.tensors[i].const for o in dynamic for i in o.inputs)
    assert all(new.roles[o.id] == SPEC for o in dynamic)


# -- the plan (needs libquantgraph_onednn's plan-time ABI) --------------------------------------


def _partition_abi_missing() -> str | None:
    from quantgraph.backends import onednn
    from quantgraph.errors import BackendError
    from quantgraph.fusion import onednn_library

    reason = onednn.unavailable_reason()
    if reason is not None:
        return reason
    try:
        onednn_library.library()
    except BackendError as error:
        return str(error)
    return None


requires_partitions = pytest.mark.skipif(
    _partition_abi_missing() is not None, reason=f"oneDNN partitions: {_partition_abi_missing()}"
)


def _plan(model: onnx.ModelProto | Path) -> tuple[ir.Model, FusionPlan]:
    converted = quantgraph.convert(model).model
    return converted, onednn_engine.plan(converted, 99, "onednn")


@requires_partitions
def test_the_plan_of_the_bundled_cnn_names_each_partition() -> None:
    model, plan = _plan(ROOT / "models" / "cnn_u8.onnx")
    units = {u.compute: u for u in plan.units}
    assert set(units) == {"conv1", "pool1", "conv2", "fc"}
    assert units["conv1"].kernel == "oneDNN partition: Dequantize x2, Convolution, Quantize"
    assert set(units["conv1"].nodes) == {
        "conv1_w_DequantizeLinear",
        "input_DequantizeLinear",
        "relu1_QuantizeLinear",
    }
    assert units["fc"].op_type == "Gemm" and "MatMul" in units["fc"].kernel
    assert all(u.engine == "onednn" for u in plan.units)
    alone = {a.node: a.reason for a in plan.alone}
    assert alone["input_QuantizeLinear"] == NO_PARTITION
    # The session's copy: one OneDnnPartition node per unit, the folded biases gone.
    ops = [n.op_type for n in model.graph]
    assert ops.count(PARTITION_OP) == 4
    assert "DequantizeLinear" not in ops
    text = next(n for n in model.graph if n.op_type == PARTITION_OP).attributes["description"]
    assert text.value.startswith("qgpart 1\n") and "\ninputs " in text.value
    assert plan.to_dict()["fused_spec_ops"] == 11


@requires_partitions
def test_a_mixed_plan_keeps_a_spec_op_the_partition_would_change() -> None:
    _, plan = _plan(_qdq_conv([3, -2]))
    alone = {a.node: a.reason for a in plan.alone}
    assert alone["wdq"] == PER_CHANNEL_ZPS
    assert all("wdq" not in u.nodes for u in plan.units)
    _, clean = _plan(_qdq_conv([0, 0]))
    assert [u.compute for u in clean.units] == ["conv"]
    assert set(clean.units[0].nodes) == {"dq", "wdq"}


@requires_partitions
def test_spec_ops_in_subgraphs_stay_with_the_reason() -> None:
    _, plan = _plan(ROOT / "models" / "if_branch_u8.onnx")
    inner = [a for a in plan.alone if a.graph]
    assert inner and all(a.reason == SUBGRAPH for a in inner)


@requires_partitions
def test_a_model_without_spec_ops_plans_nothing() -> None:
    model = ir.from_proto(_single([helper.make_node("Relu", ["x"], ["y"])], [], [2], [2]))
    plan = onednn_engine.plan(model, 99, "onednn")
    assert not plan.units and not plan.alone


# -- fusion "auto": the rule table -------------------------------------------------------------


def _candidate(
    kinds: list[str], weights: tuple[str, ...] = (), rows: int | None = None
) -> Candidate:
    ops = tuple(description.Op(i, kind, (), ()) for i, kind in enumerate(kinds))
    node = ir.Node("", "MatMul", [], name="n")
    return Candidate(ops, "", (), (), node, (), weights, rows)


@pytest.mark.parametrize(
    ("kinds", "weights", "rows", "engine", "words"),
    [
        (["DynamicDequantize", "MatMul"], ("u4",), 128, "onnxruntime", "4-bit"),
        (["Dequantize", "Dequantize", "MatMul", "Quantize"], ("s8",), 1, "onnxruntime", "M <= 16"),
        (["Dequantize", "Dequantize", "MatMul"], ("s8",), 128, "onednn", "M > 16"),
        (["Dequantize", "Dequantize", "MatMul"], ("s8",), None, "onednn", "unknown"),
        (["Dequantize", "Dequantize", "Convolution", "Quantize"], ("s8",), None, "onednn", "conv"),
        (["Dequantize", "MaxPool", "Quantize"], (), None, "onnxruntime", "no convolution"),
    ],
)
def test_auto_rules_choose_an_engine_and_say_why(
    kinds: list[str], weights: tuple[str, ...], rows: int | None, engine: str, words: str
) -> None:
    chosen, why = auto_engine.choose(_candidate(kinds, weights, rows))
    assert chosen == engine and words in why
