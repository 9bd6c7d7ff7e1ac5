"""Models built the way real producers build them: onnxruntime's quantize_static (QDQ and
QOperator, UseQDQContribOps below opset 13), its MatMulNBitsQuantizer (short last blocks) and
quantize_dynamic, run on small float models. Cached: each producer run takes a second or so.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

logging.getLogger("onnxruntime.quantization").setLevel(logging.ERROR)
logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's "run pre-processing" advice


def cnn(opset: int = 13) -> onnx.ModelProto:
    """x [1, 3, 8, 8] -> Conv -> Relu -> Flatten -> MatMul [256, 10] -> Add -> y."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: list[int], scale: float) -> onnx.TensorProto:
        values = rng.standard_normal(shape) * scale
        return numpy_helper.from_array(values.astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "w"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            weight("cw", [4, 3, 3, 3], 0.2),
            weight("cb", [4], 0.1),
            weight("w", [256, 10], 0.1),
            weight("b", [10], 0.1),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


class _Calibration:
    """quantize_static's CalibrationDataReader: four seeded samples of x."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self._samples: Iterator[dict[str, np.ndarray]] = iter(
            [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._samples, None)


def _through_files(model: onnx.ModelProto, quantize: object) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "float.onnx", Path(scratch) / "quantized.onnx"
        onnx.save(model, source)
        quantize(source, target)  # type: ignore[operator]
        return onnx.load(target)


@cache
def static_quantized(
    opset: int = 13, *, qoperator: bool = False, contrib: bool = False, per_channel: bool = True
) -> onnx.ModelProto:
    """cnn(opset) through quantize_static: QDQ (com.microsoft Q/DQ with ``contrib``, as
    UseQDQContribOps writes them) or QOperator (QLinearConv, QLinearMatMul, QLinearAdd)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as quantize

    class Reader(_Calibration, CalibrationDataReader):  # type: ignore[misc]
        pass

    def run(source: Path, target: Path) -> None:
        quantize(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QOperator if qoperator else QuantFormat.QDQ,
            per_channel=per_channel,
            weight_type=QuantType.QInt8,
            extra_options={"UseQDQContribOps": True} if contrib else {},
        )

    return _through_files(cnn(opset), run)


@cache
def nncf_quantized(arch: str) -> onnx.ModelProto:
    """cnn(13) ("cnn") or mlp(64) ("mlp", a symbolic batch dim) through NNCF's post-training
    quantization (its ONNX backend: QDQ, u8 activations, s8 per-channel weights, negative
    weight axes, fast bias correction), calibrated on eight seeded samples."""
    import nncf

    model = cnn(13) if arch == "cnn" else mlp(64)
    source = model.graph.input[0]
    shape = [d.dim_value or 2 for d in source.type.tensor_type.shape.dim]
    rng = np.random.default_rng(7)
    samples = [{source.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)]
    logging.getLogger("nncf").setLevel(logging.ERROR)
    quantized: onnx.ModelProto = nncf.quantize(model, nncf.Dataset(samples), subset_size=8)
    return quantized


@cache
def nncf_constant_weights(preset: str) -> onnx.ModelProto:
    """A small residual CNN ending in a Sigmoid (a detector head's shape), its weights and
    biases as Constant nodes as PyTorch's exporter writes them, through NNCF's post-training
    quantization with ``preset`` ("performance" or "mixed"): NNCF then quantizes the float
    weights in the graph, Constant -> QuantizeLinear -> DequantizeLinear -> Conv."""
    import nncf

    rng = np.random.default_rng(1)

    def constant(name: str, shape: tuple[int, ...], scale: float) -> onnx.NodeProto:
        array = (rng.standard_normal(shape) * scale).astype(np.float32)
        value = numpy_helper.from_array(array, name)
        return helper.make_node("Constant", [], [name], value=value, name=f"c_{name}")

    nodes = [
        constant("w1", (8, 3, 3, 3), 0.3),
        constant("b1", (8,), 0.1),
        constant("w2", (8, 8, 3, 3), 0.2),
        constant("b2", (8,), 0.1),
        constant("w3", (1, 8, 1, 1), 0.3),
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
        helper.make_node("Sigmoid", ["c3"], ["y"], name="sigmoid"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 32, 32])
    graph = helper.make_graph(nodes, "residual", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    samples = [{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(8)]
    logging.getLogger("nncf").setLevel(logging.ERROR)
    chosen = (
        nncf.QuantizationPreset.MIXED if preset == "mixed" else nncf.QuantizationPreset.PERFORMANCE
    )
    quantized: onnx.ModelProto = nncf.quantize(
        model, nncf.Dataset(samples), subset_size=8, preset=chosen
    )
    return quantized


@cache
def nncf_detector(size: int = 96) -> onnx.ModelProto:
    """tests/ocr_detector.py's PaddleOCR-style detector (Constant weights) through NNCF's
    post-training quantization with the mixed preset (symmetric weights, asymmetric
    activations: u8 and s8 ones side by side), calibrated on four seeded samples."""
    import nncf

    from tests.ocr_detector import ocr_detector

    rng = np.random.default_rng(7)
    shape = (1, 3, size, size)
    samples = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)]
    logging.getLogger("nncf").setLevel(logging.ERROR)
    quantized: onnx.ModelProto = nncf.quantize(
        ocr_detector(size),
        nncf.Dataset(samples),
        subset_size=4,
        preset=nncf.QuantizationPreset.MIXED,
    )
    return quantized


@cache
def dynamic_quantized(opset: int = 13) -> onnx.ModelProto:
    """cnn(opset) through quantize_dynamic: DynamicQuantizeLinear feeding ConvInteger and
    MatMulInteger."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def run(source: Path, target: Path) -> None:
        quantize_dynamic(
            source, target, weight_type=QuantType.QUInt8, op_types_to_quantize=["Conv", "MatMul"]
        )

    return _through_files(cnn(opset), run)


def float_gru_step(tokens: int = 256, hidden: int = 128) -> onnx.ModelProto:
    """One step of a GRU decoder: token [batch] -> Gather(embedding [tokens, hidden]) -> GRU
    (one time step, state h [1, batch, hidden] in and out) -> MatMul head [hidden, tokens] ->
    Add -> logits [batch, tokens]; a fraction of a millisecond a step (issue #42)."""
    rng = np.random.default_rng(3)

    def weight(name: str, shape: list[int], scale: float) -> onnx.TensorProto:
        values = rng.standard_normal(shape) * scale
        return numpy_helper.from_array(values.astype(np.float32), name)

    nodes = [
        helper.make_node("Gather", ["embedding", "token"], ["e"], name="embed"),
        helper.make_node("Unsqueeze", ["e", "zero"], ["x"], name="as_sequence"),
        helper.make_node(
            "GRU", ["x", "w", "r", "b", "", "h"], ["", "h_out"], name="gru", hidden_size=hidden
        ),
        helper.make_node("Squeeze", ["h_out", "zero"], ["state"], name="state"),
        helper.make_node("MatMul", ["state", "head"], ["scores"], name="head"),
        helper.make_node("Add", ["scores", "head_bias"], ["logits"], name="bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "gru_step",
        [
            helper.make_tensor_value_info("token", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "batch", hidden]),
        ],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", tokens]),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, "batch", hidden]),
        ],
        [
            weight("embedding", [tokens, hidden], 0.5),
            weight("w", [1, 3 * hidden, hidden], 0.1),
            weight("r", [1, 3 * hidden, hidden], 0.1),
            weight("b", [1, 6 * hidden], 0.1),
            weight("head", [hidden, tokens], 0.1),
            weight("head_bias", [tokens], 0.1),
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    return model


@cache
def gru_step(tokens: int = 256, hidden: int = 128) -> onnx.ModelProto:
    """float_gru_step through quantize_dynamic with its defaults: the embedding table becomes
    u8 with a DequantizeLinear after the Gather, the head MatMul DynamicQuantizeLinear +
    MatMulInteger (s8 weights) and its Cast -> Mul scale chain; the GRU stays float (no
    integer GRU in onnxruntime)."""
    from onnxruntime.quantization import quantize_dynamic

    def run(source: Path, target: Path) -> None:
        quantize_dynamic(source, target)

    return _through_files(float_gru_step(tokens, hidden), run)


def mlp(k: int, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """x [batch, k] -> MatMul [k, 40] -> Relu -> MatMul [40, k] -> y: both weights have a
    short last block for blocks of 16 or 32 when k is 56 or 120 (and 40 is one too)."""
    rng = np.random.default_rng(0)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np_type), name)

    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", dtype, ["batch", k])],
        [helper.make_tensor_value_info("y", dtype, ["batch", k])],
        [weight("w1", [k, 40]), weight("w2", [40, k])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@cache
def gated_mlp(d: int = 64, f: int = 128, block: int = 32) -> onnx.ModelProto:
    """An LLM's gated MLP, down(swish(x @ gate) * (x @ up)), with int4/uint4 weights from
    MatMulNBitsQuantizer (QDQ, asymmetric, blocks along K): oneDNN v3.7+'s quantized_gated_mlp
    pattern (three DynamicDequantize -> MatMul, Sigmoid, two Multiply)."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    nodes = [
        helper.make_node("MatMul", ["x", "w_gate"], ["g"], name="gate"),
        helper.make_node("MatMul", ["x", "w_up"], ["u"], name="up"),
        helper.make_node("Sigmoid", ["g"], ["gs"], name="sigmoid"),
        helper.make_node("Mul", ["g", "gs"], ["swish"], name="swish"),
        helper.make_node("Mul", ["swish", "u"], ["gated"], name="gated"),
        helper.make_node("MatMul", ["gated", "w_down"], ["y"], name="down"),
    ]
    graph = helper.make_graph(
        nodes,
        "gated_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["tokens", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["tokens", d])],
        [weight("w_gate", [d, f]), weight("w_up", [d, f]), weight("w_down", [f, d])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return matmul_nbits(model, block, symmetric=False)


def matmul_nbits(
    model: onnx.ModelProto, block: int, *, symmetric: bool, qoperator: bool = False
) -> onnx.ModelProto:
    """``model``'s MatMul weights through onnxruntime's MatMulNBitsQuantizer: blocked int4
    (symmetric) or uint4 + zero points (asymmetric) DequantizeLinear in QDQ format,
    MatMulNBits in QOperator format."""
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=block,
        is_symmetric=symmetric,
        quant_format=QuantFormat.QOperator if qoperator else QuantFormat.QDQ,
        op_types_to_quantize=("MatMul",),
    )
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(model, algo_config=config)
    quantizer.process()
    result: onnx.ModelProto = quantizer.model.model
    return result


@cache
def weight_only(
    k: int,
    block: int,
    symmetric: bool,
    dtype: int = TensorProto.FLOAT,
    *,
    qoperator: bool = False,
) -> onnx.ModelProto:
    """mlp(k) through MatMulNBitsQuantizer (:func:`matmul_nbits`)."""
    return matmul_nbits(mlp(k, dtype), block, symmetric=symmetric, qoperator=qoperator)
