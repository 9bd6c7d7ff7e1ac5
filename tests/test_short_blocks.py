"""Blocked DequantizeLinear whose last block is short (issue 21 item 3).

onnxruntime's MatMulNBitsQuantizer writes K = 56 with blocks of 16 (scales of ceil(K/B) rows);
quantgraph pads the constant weight to whole groups, dequantizes per_group and slices the result
back. It must convert every such node, validate exactly on the native backend, and `lower` must
give back the producer's model: same nodes, same initializers, same outputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.errors import BackendError
from quantgraph.passes.qdq.short_blocks import PADDED
from quantgraph.spec import DOMAIN
from tests.builders import dequantize_linear_model, requires_native, run_ort
from tests.producers import weight_only

# (K, block): K = 56 is 3.5 blocks of 16, 120 is 3.75 blocks of 32; the second MatMul's K = 40.
SHAPES = [(56, 16), (120, 32)]
KINDS = [(True, TensorProto.FLOAT), (False, TensorProto.FLOAT), (True, TensorProto.FLOAT16),
         (False, TensorProto.FLOAT16)]  # fmt: skip
IDS = ["int4-sym-f32", "uint4-asym-f32", "int4-sym-f16", "uint4-asym-f16"]


def _x(k: int, dtype: int) -> np.ndarray:
    values = np.random.default_rng(3).standard_normal((3, k))
    return values.astype(helper.tensor_dtype_to_np_dtype(dtype))


def _nodes(model: onnx.ModelProto) -> list[tuple[object, ...]]:
    return [
        (n.domain or "", n.op_type, n.name, list(n.input), list(n.output),
         {a.name: helper.get_attribute_value(a) for a in n.attribute})
        for n in model.graph.node
    ]  # fmt: skip


def _arrays(model: onnx.ModelProto) -> dict[str, tuple[str, list[int], bytes]]:
    found = {}
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        found[tensor.name] = (str(array.dtype), list(array.shape), array.tobytes())
    return found


@pytest.mark.parametrize(("symmetric", "dtype"), KINDS, ids=IDS)
@pytest.mark.parametrize(("k", "block"), SHAPES, ids=[f"K{k}-block{b}" for k, b in SHAPES])
def test_every_short_last_block_converts(k: int, block: int, symmetric: bool, dtype: int) -> None:
    original = weight_only(k, block, symmetric, dtype)
    result = quantgraph.convert(original)
    assert result.report.skipped == []
    assert result.report.converted == {"DequantizeLinear": 2}
    quant = "s4" if symmetric else "u4"
    scales = "" if dtype == TensorProto.FLOAT else ", f16 scales"
    padded = {k: -(-k // block) * block, 40: -(-40 // block) * block}
    assert sorted(n.detail for n in result.report.converted_nodes) == sorted(
        f"{quant}, per_group [{block}, 1]{scales}, last block padded {extent} -> {padded[extent]} "
        "and sliced"
        for extent in (k, 40)
    )
    slices = [n for n in result.proto.graph.node if n.op_type == "Slice"]
    assert sorted(p.value for s in slices for p in s.metadata_props if p.key == PADDED) == sorted(
        [str(k), "40"]
    )
    spec = [n for n in result.proto.graph.node if n.domain == DOMAIN]
    assert [n.name for n in spec] == [n.name for n in original.graph.node if "DQ" in n.name]


@requires_native
@pytest.mark.parametrize(("symmetric", "dtype"), KINDS, ids=IDS)
@pytest.mark.parametrize(("k", "block"), SHAPES, ids=[f"K{k}-block{b}" for k, b in SHAPES])
def test_native_validates_exactly_and_lower_gives_the_original_back(
    k: int, block: int, symmetric: bool, dtype: int
) -> None:
    original = weight_only(k, block, symmetric, dtype)
    converted = quantgraph.convert(original).proto
    report = quantgraph.validate(original, converted, backend="native", iterations=3)
    assert report.agree, report.to_dict()
    x = {"x": _x(k, dtype)}
    assert np.array_equal(
        quantgraph.InferenceSession(converted, "native").run(None, x)[0], run_ort(original, x)[0]
    )

    lowered = quantgraph.lower(converted)
    assert lowered.report.skipped == []
    back = lowered.proto
    assert [n.SerializeToString() for n in back.graph.node] == [
        n.SerializeToString() for n in original.graph.node
    ]
    assert _arrays(back) == _arrays(original)
    assert back.opset_import == original.opset_import
    assert np.array_equal(run_ort(back, x)[0], run_ort(original, x)[0])


def test_the_python_backend_refuses_4_bit_with_a_reason() -> None:
    converted = quantgraph.convert(weight_only(56, 16, False)).proto
    with pytest.raises(BackendError, match="has src type u4: onnxruntime-extensions has no 4-bit"):
        quantgraph.InferenceSession(converted, "python")


def test_a_fed_src_with_a_short_last_block_stays_as_it_was() -> None:
    """A src fed at run time cannot be padded ahead of time: the node stays, with the reason,
    and the model is unchanged."""
    model = dequantize_linear_model(
        (TensorProto.INT8, [4, 6]), np.full((2, 6), 0.5, np.float32), axis=0, block_size=3
    )
    result = quantgraph.convert(model)
    (skipped,) = result.report.skipped
    assert "a short last block is padded only in a constant src" in skipped.reason
    assert _nodes(result.proto) == _nodes(model)


def test_padding_a_node_the_rewrite_skips_is_undone() -> None:
    """output_dtype other than the scales' type is not the spec's: the padded node is skipped,
    and the model comes out as it came in (no Slice, no padded weight)."""
    weight = helper.make_tensor("w", TensorProto.INT8, [4, 6], list(range(24)))
    model = dequantize_linear_model(
        weight,
        np.full((2, 6), 0.5, np.float32),
        y_type=TensorProto.FLOAT16,
        axis=0,
        block_size=3,
        output_dtype=TensorProto.FLOAT16,
        opset=23,
    )
    result = quantgraph.convert(model)
    assert result.report.converted == {}
    (skipped,) = result.report.skipped
    assert skipped.node == model.graph.node[0].name and "output_dtype" in skipped.reason
    assert _nodes(result.proto) == _nodes(model)
    assert _arrays(result.proto) == _arrays(model)


def test_a_users_own_slice_after_a_blocked_dequantize_is_not_folded() -> None:
    """lower folds only the Slice conversion marked; the same pattern written by the user
    stays."""
    weight = helper.make_tensor("w", TensorProto.INT8, [6, 2], list(range(12)))
    scale = numpy_helper.from_array(np.full((2, 2), 0.5, np.float32), "s")
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "s"], ["d"], axis=0, block_size=3, name="dq"),
        helper.make_node("Slice", ["d", "st", "en", "ax"], ["y"], name="mine"),
    ]
    constants = [
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("st", [0]), ("en", [4]), ("ax", [0]))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2])],
        [weight, scale, *constants],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    converted = quantgraph.convert(model).proto
    lowered = quantgraph.lower(converted).proto
    assert [n.op_type for n in lowered.graph.node] == ["DequantizeLinear", "Slice"]
    assert np.array_equal(run_ort(lowered)[0], run_ort(model)[0])


@requires_native
def test_inside_an_if_branch_with_a_dynamic_quantize_linear() -> None:
    """Subgraphs hold no initializers: the padded weight and the Slice's bounds are Constant
    nodes there; the branch's DynamicQuantizeLinear (whose scale is a branch output) converts
    too, and lower folds both back inside the branch."""
    x_info = helper.make_tensor_value_info
    then = helper.make_graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql"),
            helper.make_node("Cast", ["y"], ["yf"], to=TensorProto.FLOAT),
            helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0, block_size=3,
                             name="bdq"),
            helper.make_node("MatMul", ["yf", "wd"], ["o"]),
        ],
        "then",
        [],
        [x_info("o", TensorProto.FLOAT, [3, 2]), x_info("s", TensorProto.FLOAT, [])],
    )  # fmt: skip
    other = helper.make_graph(
        [
            helper.make_node("Identity", ["xx"], ["o2"]),
            helper.make_node("Identity", ["one"], ["s2"]),
        ],
        "else",
        [],
        [x_info("o2", TensorProto.FLOAT, [3, 2]), x_info("s2", TensorProto.FLOAT, [])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["out", "sc"], then_branch=then, else_branch=other)],
        "g",
        [x_info("c", TensorProto.BOOL, []), x_info("x", TensorProto.FLOAT, [3, 4])],
        [x_info("out", TensorProto.FLOAT, [3, 2]), x_info("sc", TensorProto.FLOAT, [])],
        [
            helper.make_tensor("w", TensorProto.INT4, [4, 2], [1, -2, 3, 4, -5, 6, 7, -8]),
            numpy_helper.from_array(np.full((2, 2), 0.5, np.float32), "ws"),
            numpy_helper.from_array(np.ones((3, 2), np.float32), "xx"),
            numpy_helper.from_array(np.array(1, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    result = quantgraph.convert(model)
    assert [(n.node, n.graph) for n in result.report.converted_nodes] == [
        ("dql", "then"),
        ("bdq", "then"),
    ]
    feeds = {"c": np.array(True), "x": _x(4, TensorProto.FLOAT)[:3].copy()}
    assert quantgraph.validate(model, result.proto, backend="native", inputs=feeds).agree
    lowered = quantgraph.lower(result.proto).proto
    branch = next(a.g for a in lowered.graph.node[0].attribute if a.name == "then_branch")
    # Both come back; the weight (padded, then trimmed back) is an initializer of the branch
    # (a 4-bit tensor: an initializer, not a Constant node).
    assert [n.op_type for n in branch.node] == [
        "DynamicQuantizeLinear", "Cast", "DequantizeLinear", "MatMul"
    ]  # fmt: skip
    assert [t.name for t in branch.initializer] == ["w"]
    assert np.array_equal(run_ort(lowered, feeds)[0], run_ort(model, feeds)[0])
