"""Per-node error figures (validate FLOAT QUANT --intermediate / --sensitivity, quantgraph.
validation.debug.node_error) on every form of a small exported transformer (issue 42, item 4): QDQ
with s8 and u8 activations (a DequantizeLinear shared by several nodes once gave two nodes one
name), quantize_dynamic's MatMulInteger units and MatMulNBits, each also converted (debugged as
the Q/DQ form it lowers to). The figures of the units are numpy's on the same float values."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

import quantgraph
from quantgraph.cpu import cpu
from quantgraph.validation.debug.debugger import QuantizationDebug

from . import exported_transformer

FORMS: dict[str, Callable[[], onnx.ModelProto]] = {
    "qdq_s8": lambda: exported_transformer.quantized("s8"),
    "qdq_u8": lambda: exported_transformer.quantized("u8"),
    "dynamic": exported_transformer.dynamic_quantized,
    "matmul_nbits": exported_transformer.weight_only,
}
WEIGHT_MATMULS = 6 * exported_transformer.LAYERS  # q, k, v, o, and the MLP's two
EPS32 = float(np.finfo(np.float32).eps)


def _debug(quantized: onnx.ModelProto, sensitivity: int | None = None) -> QuantizationDebug:
    report = quantgraph.validate(
        exported_transformer.float_model(),
        quantized,
        intermediate=True,
        iterations=2,
        sensitivity=sensitivity,
    )
    assert report.debug is not None
    return report.debug


@pytest.mark.parametrize("form", FORMS)
def test_every_form_and_its_conversion_has_node_figures(form: str) -> None:
    quantized = FORMS[form]()
    debug = _debug(quantized)
    assert debug.nodes_error is None
    weights = [n for n in debug.nodes if n.op_type in ("MatMul", "MatMulInteger", "MatMulNBits")]
    assert len(weights) == WEIGHT_MATMULS
    assert all(math.isfinite(n.sqnr_db) for n in weights)
    converted = _debug(quantgraph.convert(quantized).proto)
    assert converted.nodes_error is None
    assert [n.to_dict() for n in converted.nodes] == [n.to_dict() for n in debug.nodes]
    assert [t.to_dict() for t in converted.tensors] == [t.to_dict() for t in debug.tensors]


def test_sensitivity_runs_on_the_transformer_and_its_conversion() -> None:
    quantized = exported_transformer.quantized("s8")
    for model in (quantized, quantgraph.convert(quantized).proto):
        debug = _debug(model, sensitivity=2)
        assert debug.sensitivity is not None and len(debug.sensitivity) == 2
        assert all(math.isfinite(s.output_sqnr_db) for s in debug.sensitivity)


def _float_values(samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every tensor of the float model on each sample (onnxruntime, every value an output)."""
    model = exported_transformer.float_model()
    names = [o for n in model.graph.node for o in n.output]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names[:-1])
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options)
    outputs = [o.name for o in session.get_outputs()]
    return [{**s, **dict(zip(outputs, session.run(outputs, s), strict=True))} for s in samples]


def _sqnr_within_sum_order(
    figure: float, x: list[np.ndarray], want: list[np.ndarray], got: list[np.ndarray], w: np.ndarray
) -> None:
    """numpy's ``got`` sums in another order than onnxruntime's kernel: each element may differ
    by K eps sum|x||w| (the float32 sum-order bound), which moves the noise's norm by at most
    that vector's norm; the figure must lie within the SQNRs the bound allows."""
    signal = sum(float(np.sum(a.astype(np.float64) ** 2)) for a in want)
    pairs = zip(want, got, strict=True)
    noise = math.sqrt(sum(float(np.sum((a.astype(np.float64) - b) ** 2)) for a, b in pairs))
    k = w.shape[0]
    slack = math.sqrt(sum(float(np.sum((k * EPS32 * (np.abs(a) @ np.abs(w))) ** 2)) for a in x))
    best = 10 * math.log10(signal / max(noise - slack, 1e-300) ** 2)
    worst = 10 * math.log10(signal / (noise + slack) ** 2)
    assert worst <= figure <= best, (worst, figure, best)


def _samples() -> list[dict[str, np.ndarray]]:
    return [
        quantgraph.validation.make_inputs(exported_transformer.float_model(), seed=seed)
        for seed in (0, 1)
    ]


def test_matmul_nbits_figures_are_numpy_s() -> None:
    model = exported_transformer.weight_only()
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    debug = _debug(model)
    values = _float_values(_samples())
    figures = {n.node: n for n in debug.nodes}
    for node in (n for n in model.graph.node if n.op_type == "MatMulNBits"):
        attrs = {a.name: a.i for a in node.attribute}
        k, n, block = attrs["K"], attrs["N"], attrs["block_size"]
        packed, scales = arrays[node.input[1]], arrays[node.input[2]]
        nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(n, -1)[:, :k]
        weight = ((nibbles.astype(np.float32) - 8) * np.repeat(scales, block, axis=1)[:, :k]).T
        x = [v[node.input[0]] for v in values]
        got = [(a.astype(np.float64) @ weight.astype(np.float64)) for a in x]
        want = [v[node.output[0]] for v in values]
        _sqnr_within_sum_order(figures[node.name].sqnr_db, x, want, got, weight)


def _integer_sums(q: np.ndarray, zq: int, w: np.ndarray, zw: int) -> np.ndarray:
    """MatMulInteger's sums, as onnxruntime's x86 kernel forms them on this CPU: without VNNI
    each pair of u8 x s8 products (k, k + 1) is added in saturating int16 before the int32 sum
    (quantgraph.cpu; zero points are applied after, through the row and column sums)."""
    q64, w64 = q.astype(np.int64), w.astype(np.int64)
    if not cpu().int8_products_saturate:
        exact: np.ndarray = (q64 - zq) @ (w64 - zw)
        return exact
    products = np.einsum("...k,kn->...kn", q64, w64)
    k = q.shape[-1]
    pairs = products.reshape(*products.shape[:-2], k // 2, 2, products.shape[-1]).sum(axis=-2)
    raw = np.clip(pairs, -32768, 32767).sum(axis=-2)
    found: np.ndarray = raw - zw * q64.sum(axis=-1, keepdims=True) - zq * w64.sum(axis=0)
    found += k * zq * zw
    return found


def test_dynamic_quantization_figures_are_numpy_s() -> None:
    """DynamicQuantizeLinear (u8: the range widened to hold 0, scale (max - min) / 255 in
    float32, zero point and x / scale rounded half to even), MatMulInteger's integer sums,
    times both scales in float32: every value is the kernel's, so the figures are equal (up to
    the float64 sums of the SQNR, taken in another order)."""
    model = exported_transformer.dynamic_quantized()
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    made = {o: n for n in model.graph.node for o in n.output}
    readers = {i: n for n in model.graph.node for i in n.input}
    by_name = {n.name: n for n in model.graph.node}
    debug = _debug(model)
    values = _float_values(_samples())
    figures = {n.node: n for n in debug.nodes}
    for node in (n for n in model.graph.node if n.op_type == "MatMulInteger"):
        source = made[node.input[0]].input[0]
        w, w_zero = arrays[node.input[1]], int(arrays[node.input[3]])
        w_scale = arrays[by_name[f"{node.name}_scales_mul"].input[1]].astype(np.float32)
        target = readers[readers[node.output[0]].output[0]].output[0]
        signal = noise = 0.0
        for v in values:
            a = v[source].astype(np.float32)
            low = np.minimum(np.float32(0), a.min())
            high = np.maximum(np.float32(0), a.max())
            scale = (high - low) / np.float32(255)
            zero = int(np.clip(np.rint(-low / scale), 0, 255))
            q = np.clip(np.rint(a / scale) + zero, 0, 255)
            sums = _integer_sums(q, zero, w, w_zero)
            got = (sums.astype(np.float32) * (scale * w_scale)).astype(np.float64)
            want = v[target].astype(np.float64)
            signal += float(np.sum(want**2))
            noise += float(np.sum((want - got) ** 2))
        assert figures[node.name].sqnr_db == pytest.approx(
            10 * math.log10(signal / noise), rel=1e-9
        )
