"""A small BERT/MiniLM-like float encoder written with onnx.helper, and its quantize_dynamic and
MatMulNBits forms: what transformers.js and optimum publish as ``model_quantized`` and
``model_q4``, at test size (no hub).

input_ids [batch, seq] -> word + position embeddings -> LayerNormalization -> ``layers`` x (
Q/K/V MatMul + Add -> heads -> Softmax(Q K^T / sqrt(d)) V -> output MatMul + Add -> residual ->
LayerNormalization -> up MatMul + Add -> Gelu as x/2 (1 + Erf(x / sqrt 2)) -> down MatMul + Add
-> residual -> LayerNormalization) -> last_hidden_state [batch, seq, hidden].
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.producers import _through_files

VOCAB = 200


def encoder(layers: int = 6, hidden: int = 64, heads: int = 4, seed: int = 0) -> onnx.ModelProto:
    """The float encoder (opset 17: LayerNormalization), weights drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(name: str, shape: list[int], scale: float) -> str:
        return const(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def node(op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def linear(x: str, name: str, k: int, n: int) -> str:
        product = node("MatMul", [x, weight(f"{name}_w", [k, n], k**-0.5)], f"{name}_mm")
        return node("Add", [product, weight(f"{name}_b", [n], 0.02)], name)

    def norm(x: str, name: str) -> str:
        gain = const(f"{name}_g", (1 + rng.standard_normal(hidden) * 0.05).astype(np.float32))
        bias = weight(f"{name}_b", [hidden], 0.02)
        return node("LayerNormalization", [x, gain, bias], name, axis=-1, epsilon=1e-12)

    d = hidden // heads
    const("heads_shape", np.array([0, 0, heads, d], np.int64))
    const("hidden_shape", np.array([0, 0, hidden], np.int64))
    const("scale", np.array(d**-0.5, np.float32))
    const("half", np.array(0.5, np.float32))
    const("one", np.array(1.0, np.float32))
    const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    const("start", np.array([0], np.int64))
    words = node("Gather", [weight("word", [VOCAB, hidden], 1.0), "input_ids"], "words")
    length = node("Shape", ["input_ids"], "length", start=1, end=2)
    positions = node("Slice", [weight("position", [512, hidden], 0.1), "start", length], "pos")
    x = norm(node("Add", [words, positions], "embedded"), "ln0")
    for layer in range(layers):
        p = f"l{layer}_"
        q, k, v = (
            node(
                "Transpose",
                [node("Reshape", [linear(x, p + n, hidden, hidden), "heads_shape"], p + n + "_r")],
                p + n + "_t",
                perm=[0, 2, 1, 3],
            )
            for n in ("q", "k", "v")
        )
        kt = node("Transpose", [k], p + "kt", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [q, kt], p + "qk"), "scale"], p + "scores")
        context = node("MatMul", [node("Softmax", [scores], p + "probs", axis=-1), v], p + "ctx")
        merged = node("Transpose", [context], p + "ctx_t", perm=[0, 2, 1, 3])
        attended = linear(
            node("Reshape", [merged, "hidden_shape"], p + "ctx_r"), p + "o", *[hidden] * 2
        )
        x = norm(node("Add", [x, attended], p + "res1"), p + "ln1")
        up = linear(x, p + "up", hidden, 4 * hidden)
        erf = node("Erf", [node("Div", [up, "sqrt2"], p + "scaled")], p + "erf")
        halved = node("Mul", [up, "half"], p + "halved")
        gelu = node("Mul", [halved, node("Add", [erf, "one"], p + "erf1")], p + "gelu")
        x = norm(
            node("Add", [x, linear(gelu, p + "down", 4 * hidden, hidden)], p + "res2"), p + "ln2"
        )
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden]
            )
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


@cache
def dynamic_encoder(
    layers: int = 6, hidden: int = 64, seed: int = 0, weights: str = "s8"
) -> onnx.ModelProto:
    """encoder() through onnxruntime's quantize_dynamic (its defaults: s8 weights; ``weights``
    "u8": QUInt8): DynamicQuantizeLinear + MatMulInteger + Cast + Mul per MatMul with a weight."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def run(source: Path, target: Path) -> None:
        options = {"weight_type": QuantType.QUInt8} if weights == "u8" else {}
        quantize_dynamic(source, target, **options)

    return _through_files(encoder(layers, hidden, seed=seed), run)


@cache
def nbits_encoder(layers: int = 2, hidden: int = 64, accuracy_level: int = 4) -> onnx.ModelProto:
    """encoder() through MatMulNBitsQuantizer (int4, block 32, symmetric; QOperator format:
    MatMulNBits) with ``accuracy_level`` (4: onnxruntime quantizes A to int8 per block)."""
    import logging

    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=32, is_symmetric=True, accuracy_level=accuracy_level
    )
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(encoder(layers, hidden), algo_config=config)
    quantizer.process()
    result: onnx.ModelProto = quantizer.model.model
    return result


def token_ids(seed: int, sequence: int = 64, batch: int = 1) -> dict[str, np.ndarray]:
    """input_ids inside the vocabulary."""
    ids = np.random.default_rng(seed).integers(0, VOCAB, (batch, sequence), dtype=np.int64)
    return {"input_ids": ids}
