"""The OneDnnPartition op (com.quantgraph.onednn): QDQ units built by hand, run as one compiled
oneDNN Graph partition inside onnxruntime, against onnxruntime running the same QDQ ops
(ORT_DISABLE_ALL: float arithmetic between DequantizeLinear and QuantizeLinear)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantgraph.spec import DOMAIN as SPEC_DOMAIN
from quantgraph.spec import OPSET_VERSION
from tests.builders import requires_native, requires_onednn
from tests.onednn.partition_support import (
    Description,
    call,
    conv_unit,
    int8_saturates,
    matmul_unit,
    model,
    partition_node,
    reference_session,
    session,
)

pytestmark = requires_onednn

U8, S8, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT
RNG = np.random.default_rng(24)


@dataclass
class Unit:
    """A QDQ unit's data: weights, bias and quantization parameters."""

    weights: np.ndarray  # s8
    bias: np.ndarray  # f32
    w_scales: np.ndarray
    x_scale: float = 0.05
    x_zp: int = 128
    y_scale: float = 0.25
    y_zp: int = 0


# Weights within +-64: the float composition's results on every CPU (see
# test_full_range_weights_compute_as_onnxruntimes_fused_kernels).
SAFE = 64


def conv_data(
    out_channels: int = 16, in_channels: int = 8, seed: int = 0, limit: int = SAFE
) -> Unit:
    rng = np.random.default_rng(seed)
    return Unit(
        weights=rng.integers(-limit, limit + 1, (out_channels, in_channels, 3, 3)).astype(np.int8),
        bias=rng.normal(0, 1, out_channels).astype(np.float32),
        w_scales=rng.uniform(0.002, 0.01, out_channels).astype(np.float32),
    )


def matmul_data(k: int = 64, n: int = 32, seed: int = 0) -> Unit:
    rng = np.random.default_rng(seed)
    return Unit(
        weights=rng.integers(-SAFE, SAFE + 1, (k, n)).astype(np.int8),
        bias=rng.normal(0, 1, n).astype(np.float32),
        w_scales=rng.uniform(0.002, 0.01, n).astype(np.float32),
        y_scale=0.05,
    )


def _const(name: str, value: np.ndarray | np.generic) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def qdq_nodes(kind: str, unit: Unit, x: str, w: str, b: str, y: str) -> list[onnx.NodeProto]:
    """The same unit in ONNX QDQ form (its parameters as initializers named after `y`)."""
    p = f"{y}_"
    axis = 0 if kind == "conv" else 1
    nodes = [
        helper.make_node("DequantizeLinear", [x, p + "xs", p + "xzp"], [p + "xf"]),
        helper.make_node("DequantizeLinear", [w, p + "ws", p + "wzp"], [p + "wf"], axis=axis),
    ]
    if kind == "conv":
        nodes.append(
            helper.make_node("Conv", [p + "xf", p + "wf", b], [p + "c"], pads=[1, 1, 1, 1])
        )
        nodes.append(helper.make_node("Relu", [p + "c"], [p + "r"]))
    else:
        nodes.append(helper.make_node("MatMul", [p + "xf", p + "wf"], [p + "m"]))
        nodes.append(helper.make_node("Add", [p + "m", b], [p + "r"]))
    nodes.append(helper.make_node("QuantizeLinear", [p + "r", p + "ys", p + "yzp"], [y]))
    return nodes


def qdq_initializers(unit: Unit, y: str) -> list[TensorProto]:
    p = f"{y}_"
    return [
        _const(p + "xs", np.float32(unit.x_scale)),
        _const(p + "xzp", np.uint8(unit.x_zp)),
        _const(p + "ws", unit.w_scales),
        _const(p + "wzp", np.zeros(unit.w_scales.size, np.int8)),
        _const(p + "ys", np.float32(unit.y_scale)),
        _const(p + "yzp", np.uint8(unit.y_zp)),
    ]


def describe(kind: str, unit: Unit, src: Sequence[int | None]) -> Description:
    if kind == "conv":
        description, _ = conv_unit(
            src=src,  # type: ignore[arg-type]
            out_channels=unit.weights.shape[0],
            x_scale=unit.x_scale,
            x_zp=unit.x_zp,
            w_scales=unit.w_scales,
            y_scale=unit.y_scale,
            y_zp=unit.y_zp,
        )
        return description
    return matmul_unit(
        m=src[0],  # type: ignore[arg-type]
        k=unit.weights.shape[0],
        n=unit.weights.shape[1],
        x_scale=unit.x_scale,
        x_zp=unit.x_zp,
        w_scales=unit.w_scales,
        y_scale=unit.y_scale,
    )


def models(
    kind: str, units: Sequence[Unit], src: Sequence[int | str | None]
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(partition model, QDQ reference model): one node per unit, all on input x, outputs
    y0, y1, ..."""
    known = [d if isinstance(d, int) else None for d in src]
    x = helper.make_tensor_value_info("x", U8, list(src))
    nodes, ref_nodes, inits, ref_inits, outs = [], [], [], [], []
    for i, unit in enumerate(units):
        y, w, b = f"y{i}", f"w{i}", f"b{i}"
        inits += [_const(w, unit.weights), _const(b, unit.bias)]
        nodes.append(partition_node(describe(kind, unit, known), ["x", w, b], [y], f"part{i}"))
        ref_nodes += qdq_nodes(kind, unit, "x", w, b, y)
        ref_inits += qdq_initializers(unit, y)
        outs.append(helper.make_tensor_value_info(y, U8, None))
    return (
        model(nodes, [x], outs, inits),
        model(ref_nodes, [x], outs, inits + ref_inits),
    )


def _run_both(
    built: tuple[onnx.ModelProto, onnx.ModelProto], x: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    got = session(built[0]).run(None, {"x": x})
    want = reference_session(built[1]).run(None, {"x": x})
    return got, want


def assert_within_one_step(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert int(diff.max()) <= 1, f"{int((diff > 1).sum())} elements differ by more than 1 step"
    assert np.mean(diff) < 0.05  # ties at most: the bulk is exact


def test_conv_unit_matches_onnxruntimes_qdq_within_one_step() -> None:
    x = RNG.integers(0, 256, (1, 8, 10, 10)).astype(np.uint8)
    (got,), (want,) = _run_both(models("conv", [conv_data()], [1, 8, 10, 10]), x)
    assert want.max() > 0 and (want > 0).mean() > 0.2  # not all clamped
    assert_within_one_step(got, want)


def _fused_reference(built: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        built.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_full_range_weights_compute_as_onnxruntimes_fused_kernels(kind: str) -> None:
    # Without VNNI, oneDNN's u8 x s8 kernels add products in int16 pairs (vpmaddubsw), and so do
    # onnxruntime's fused QLinearConv / QLinearMatMul: with weights beyond +-64 both saturate the
    # same way (measured here, AVX2: conv 459 of 1,600 outputs up to 52 steps off the float
    # composition, matmul 38 of 128 up to 158; the partition equal to ORT_ENABLE_ALL in every
    # element). The partition runs, as the original model does at ORT_ENABLE_ALL.
    if kind == "conv":
        unit, src = conv_data(limit=127), [1, 8, 10, 10]
    else:
        unit, src = matmul_data(), [4, 64]
        unit.weights = np.random.default_rng(5).integers(-127, 128, (64, 32)).astype(np.int8)
    built = models(kind, [unit], src)
    x = RNG.integers(0, 256, src).astype(np.uint8)
    (got,) = session(built[0]).run(None, {"x": x})
    (fused,) = _fused_reference(built[1]).run(None, {"x": x})
    (exact,) = reference_session(built[1]).run(None, {"x": x})
    assert_within_one_step(got, fused)
    off = np.abs(got.astype(np.int32) - exact.astype(np.int32))
    if int8_saturates():
        assert int(off.max()) > 1, "no saturation any more: update docs/onednn.md"
    else:
        assert int(off.max()) <= 1


def test_matmul_unit_matches_onnxruntimes_qdq_within_one_step() -> None:
    x = RNG.integers(0, 256, (4, 64)).astype(np.uint8)
    (got,), (want,) = _run_both(models("matmul", [matmul_data()], [4, 64]), x)
    assert len(np.unique(want)) > 20
    assert_within_one_step(got, want)


def test_two_nodes_of_identical_description_keep_their_own_weights() -> None:
    # Same description text (same ids), same shapes, different constant weights and bias:
    # oneDNN v3.2 caches reordered constants by compiled kernel, so a shared kernel would give
    # both nodes the first one's weights.
    units = [conv_data(seed=1), conv_data(seed=2)]
    units[1].w_scales = units[0].w_scales
    built = models("conv", units, [1, 8, 10, 10])
    descriptions = {n.attribute[0].s for n in built[0].graph.node}
    assert len(descriptions) == 1
    x = RNG.integers(0, 256, (1, 8, 10, 10)).astype(np.uint8)
    partition = session(built[0])
    for _ in range(2):  # the second run reads the cached constants
        got = partition.run(None, {"x": x})
        want = reference_session(built[1]).run(None, {"x": x})
        assert not np.array_equal(want[0], want[1])
        for g, w in zip(got, want, strict=True):
            assert_within_one_step(g, w)


def test_changing_input_shapes_recompile() -> None:
    built = models("conv", [conv_data()], ["n", 8, "h", "w"])
    partition = session(built[0])
    for shape in [(1, 8, 10, 10), (2, 8, 6, 12), (1, 8, 10, 10)]:
        x = RNG.integers(0, 256, shape).astype(np.uint8)
        (got,) = partition.run(None, {"x": x})
        (want,) = reference_session(built[1]).run(None, {"x": x})
        assert got.shape == (shape[0], 16, shape[2], shape[3])
        assert_within_one_step(got, want)


def test_a_node_that_cannot_compile_is_refused_in_one_line() -> None:
    # Weights of inner dim 48 for an input of 64: partitioned, never compiled.
    unit = matmul_data()
    description = describe("matmul", unit, [4, 64])
    text = description.text().replace("tensor 1 s8 const 64,32", "tensor 1 s8 const 48,32")
    code, reason = call("QuantgraphOnednnCompile", text)
    assert code == 1 and "cannot compile ops [0 1 2 3]" in reason
    node = helper.make_node(
        "OneDnnPartition", ["x", "w", "b"], ["y"], name="bad", domain="com.quantgraph.onednn"
    )
    node.attribute.append(helper.make_attribute("description", text))
    inits = [_const("w", unit.weights[:48]), _const("b", unit.bias)]
    static = model(
        [node],
        [helper.make_tensor_value_info("x", U8, [4, 64])],
        [helper.make_tensor_value_info("y", U8, None)],
        inits,
    )
    with pytest.raises(Exception) as refused:  # at session creation: the shapes are known
        session(static)
    message = str(refused.value)
    assert "OneDnnPartition node 'bad': oneDNN 3." in message and reason in message
    assert "\n" not in message.split("] ", 1)[-1]
    # Unknown at session creation: the same one line when the first call compiles.
    dynamic = model(
        [node],
        [helper.make_tensor_value_info("x", U8, ["m", 64])],
        [helper.make_tensor_value_info("y", U8, None)],
        inits,
    )
    with pytest.raises(Exception, match=r"OneDnnPartition node 'bad': .*cannot compile"):
        session(dynamic).run(None, {"x": np.zeros((4, 64), np.uint8)})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("Convolution", "Convolutoin"), "description: op 2: unknown kind 'Convolutoin'"),
        (("tensor 1 s8 const", "tensor 1 s8 var"), None),
        (("tensor 1 s8 const", "tensor 1 u8 const"), "input 1 (tensor 1) is s8, the description"),
    ],
)
def test_a_bad_description_refuses_the_session_naming_the_node(
    change: tuple[str, str], message: str | None
) -> None:
    built, _ = models("conv", [conv_data()], [1, 8, 10, 10])
    attribute = built.graph.node[0].attribute[0]
    attribute.s = attribute.s.replace(change[0].encode(), change[1].encode(), 1)
    if message is None:  # var weights are legal: they just run (reordered every call)
        session(built).run(None, {"x": np.zeros((1, 8, 10, 10), np.uint8)})
        return
    with pytest.raises(Exception, match=re.escape("OneDnnPartition node 'part0': " + message)):
        session(built)


def test_a_const_input_fed_at_run_time_is_refused() -> None:
    built, _ = models("conv", [conv_data()], [1, 8, 10, 10])
    graph = built.graph
    weights = graph.initializer[0]
    graph.input.append(helper.make_tensor_value_info(weights.name, S8, list(weights.dims)))
    graph.initializer.remove(weights)
    with pytest.raises(Exception, match="is declared const but is not an initializer"):
        session(built)


@requires_native
def test_native_spec_ops_and_partition_nodes_in_one_session() -> None:
    # The partition's u8 output dequantized by the native library's com.quantgraph Dequantize.
    unit = conv_data()
    built, reference = models("conv", [unit], [1, 8, 10, 10])
    dq = helper.make_node(
        "Dequantize",
        ["y0"],
        ["yf"],
        domain=SPEC_DOMAIN,
        qtype="per_tensor",
        scales=[unit.y_scale],
        zps=[unit.y_zp],
    )
    built.graph.node.append(dq)
    built.graph.output[0].CopyFrom(helper.make_tensor_value_info("yf", F, None))
    built.opset_import.append(helper.make_opsetid(SPEC_DOMAIN, OPSET_VERSION))
    x = RNG.integers(0, 256, (1, 8, 10, 10)).astype(np.uint8)
    (got,) = session(built, spec_ops="native").run(None, {"x": x})
    (want,) = reference_session(reference).run(None, {"x": x})
    expected = (want.astype(np.float32) - unit.y_zp) * np.float32(unit.y_scale)
    assert np.max(np.abs(got - expected)) <= unit.y_scale * 1.0001


def test_the_partition_runs_from_several_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    built = models("matmul", [matmul_data()], ["m", 64])
    partition = session(built[0])
    reference = reference_session(built[1])
    inputs = [RNG.integers(0, 256, (m, 64)).astype(np.uint8) for m in (1, 3, 8, 3, 1, 8) * 4]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: partition.run(None, {"x": x})[0], inputs))
    for x, got in zip(inputs, results, strict=True):
        assert_within_one_step(got, reference.run(None, {"x": x})[0])


@pytest.mark.parametrize(
    ("src", "expected"),
    [([4, 64], [4, 32]), (["m", 64], [None, None])],
)
def test_output_type_and_shape_are_inferred_for_the_next_node(
    src: list[int | str], expected: list[int | None]
) -> None:
    # The description leaves the output's rank unknown ('-'): oneDNN's compilation gives it
    # (with the dims when the input's are known), so a following Cast sees a u8 tensor.
    built, _ = models("matmul", [matmul_data()], src)
    built.graph.node.append(helper.make_node("Cast", ["y0"], ["z"], to=F))
    built.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", F, None))
    partition = session(built)
    shape = partition.get_outputs()[0].shape
    assert [d if isinstance(d, int) else None for d in shape] == expected
    (got,) = partition.run(None, {"x": np.zeros((4, 64), np.uint8)})
    assert got.shape == (4, 32) and got.dtype == np.float32


def test_a_bad_ops_entry_fails_the_registration_in_one_line() -> None:
    from quantgraph.backends import onednn

    options = ort.SessionOptions()
    options.add_session_config_entry("quantgraph.onednn.ops", "partitions")
    onednn.load()
    with pytest.raises(Exception) as failed:
        options.register_custom_ops_library(str(onednn.kernels_path()))
    assert "quantgraph.onednn.ops must be 'all' or 'partition', got 'partitions'" in str(
        failed.value
    )


def test_node_and_description_disagreeing_on_inputs_is_refused() -> None:
    built, _ = models("conv", [conv_data()], [1, 8, 10, 10])
    del built.graph.node[0].input[2]  # no bias input; the description has three
    with pytest.raises(Exception, match="node has 2 inputs and 1 outputs, its description 3 and 1"):
        session(built)
