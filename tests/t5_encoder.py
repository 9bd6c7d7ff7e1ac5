"""Text encoders as published ones are built, for the input planner's tests (issue 42): a
T5-like encoder with a relative attention bias (position differences mapped to 32 buckets
through Abs, Log, Div, Min and Where, then a Gather on a [32, heads] table), an embedding
table read through DequantizeLinear, and an attention mask used as HF's exporters use it.

``mask_use``: "additive" ((1 - mask) * float32 min added to the scores: mask values above 1
overflow to +inf and the softmax gives NaN, as the published T5 encoder's original does on
[-100, 100]) or "log" (log(mask) added: 0 masks a position, a negative value is NaN).
:func:`quantized` puts it through onnxruntime's quantize_dynamic (MatMulInteger), as the
published T5 encoder was.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.builders import make_model, tensor_info

F, I64 = TensorProto.FLOAT, TensorProto.INT64
BUCKETS = 32
MaskUse = Literal["additive", "log"]


def _constant(name: str, value: object, dtype: type = np.int64) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def relative_buckets() -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    """T5's bidirectional bucket of (memory - context) positions, from Range over the sequence
    length: ``buckets`` [seq, seq] in [0, 32)."""
    half, exact, distance = BUCKETS // 2, BUCKETS // 4, 128
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["ids_shape"], name="ids_shape"),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq"], name="seq_len", axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["positions"], name="positions"),
        helper.make_node("Unsqueeze", ["positions", "axis1"], ["context"], name="context"),
        helper.make_node("Unsqueeze", ["positions", "axis0"], ["memory"], name="memory"),
        helper.make_node("Sub", ["memory", "context"], ["relative"], name="relative"),
        helper.make_node("Greater", ["relative", "zero"], ["after"], name="after"),
        helper.make_node("Cast", ["after"], ["after_i"], name="after_i", to=I64),
        helper.make_node("Mul", ["after_i", "half"], ["side"], name="side"),
        helper.make_node("Abs", ["relative"], ["distance"], name="distance"),
        helper.make_node("Less", ["distance", "exact"], ["small"], name="small"),
        helper.make_node("Cast", ["distance"], ["distance_f"], name="distance_f", to=F),
        helper.make_node("Div", ["distance_f", "exact_f"], ["ratio"], name="ratio"),
        helper.make_node("Log", ["ratio"], ["log_ratio"], name="log_ratio"),
        helper.make_node("Div", ["log_ratio", "log_span"], ["scaled"], name="scaled"),
        helper.make_node("Mul", ["scaled", "spread"], ["spread_f"], name="spread_f"),
        helper.make_node("Cast", ["spread_f"], ["spread_i"], name="spread_i", to=I64),
        helper.make_node("Add", ["spread_i", "exact"], ["large"], name="large"),
        helper.make_node("Min", ["large", "last"], ["large_capped"], name="large_capped"),
        helper.make_node("Where", ["small", "distance", "large_capped"], ["inner"], name="inner"),
        helper.make_node("Add", ["side", "inner"], ["buckets"], name="buckets"),
    ]
    constants = [
        _constant("zero", 0),
        _constant("one", 1),
        _constant("axis0", [0]),
        _constant("axis1", [1]),
        _constant("half", half),
        _constant("exact", exact),
        _constant("last", half - 1),
        _constant("exact_f", exact, np.float32),
        _constant("log_span", np.log(distance / exact), np.float32),
        _constant("spread", half - exact, np.float32),
    ]
    return nodes, constants


def t5_encoder(
    *,
    vocab: int = 100,
    d: int = 16,
    heads: int = 2,
    mask_use: MaskUse = "additive",
    mask_name: str = "attention_mask",
    seed: int = 0,
) -> onnx.ModelProto:
    """input_ids, ``mask_name`` [batch, sequence] (int64) -> hidden [batch, sequence, d]: one
    self-attention layer with T5's relative attention bias (32 buckets), its embedding table
    an int8 DequantizeLinear (module doc)."""
    rng = np.random.default_rng(seed)
    head = d // heads

    def weight(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    table = rng.integers(-127, 128, (vocab, d)).astype(np.int8)
    nodes = [
        helper.make_node("DequantizeLinear", ["table_q", "table_s"], ["table"], name="table"),
        helper.make_node("Gather", ["table", "input_ids"], ["x"], name="embed"),
    ]
    for name in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}_flat"], name=f"{name}_proj"),
            helper.make_node(
                "Reshape", [f"{name}_flat", "split_heads"], [f"{name}_4d"], name=f"{name}_4d"
            ),
            helper.make_node(
                "Transpose", [f"{name}_4d"], [name], name=f"{name}_heads", perm=[0, 2, 1, 3]
            ),
        ]
    bucket_nodes, constants = relative_buckets()
    nodes += bucket_nodes
    nodes += [
        helper.make_node("Transpose", ["k"], ["k_t"], name="k_t", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "k_t"], ["scores"], name="scores"),
        helper.make_node("Gather", ["relative_bias", "buckets"], ["bias"], name="bias"),
        helper.make_node("Transpose", ["bias"], ["bias_t"], name="bias_t", perm=[2, 0, 1]),
        helper.make_node("Unsqueeze", ["bias_t", "axis0"], ["bias_4d"], name="bias_4d"),
        helper.make_node("Add", ["scores", "bias_4d"], ["biased"], name="biased"),
        helper.make_node("Unsqueeze", [mask_name, "axes12"], ["mask_4d"], name="mask_4d"),
        helper.make_node("Cast", ["mask_4d"], ["mask_f"], name="mask_f", to=F),
    ]
    if mask_use == "additive":
        nodes += [
            helper.make_node("Sub", ["one_f", "mask_f"], ["masked"], name="masked"),
            helper.make_node("Mul", ["masked", "lowest"], ["extended"], name="extended"),
        ]
    else:
        nodes += [helper.make_node("Log", ["mask_f"], ["extended"], name="log_mask")]
    nodes += [
        helper.make_node("Add", ["biased", "extended"], ["logits"], name="mask_add"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["context_4d"], name="context_4d"),
        helper.make_node(
            "Transpose", ["context_4d"], ["context_t"], name="context_t", perm=[0, 2, 1, 3]
        ),
        helper.make_node("Reshape", ["context_t", "merge_heads"], ["merged"], name="merged"),
        helper.make_node("MatMul", ["merged", "wo"], ["hidden"], name="o_proj"),
    ]
    initializers = [
        numpy_helper.from_array(table, "table_q"),
        _constant("table_s", 0.01, np.float32),
        weight("wq", d, d),
        weight("wk", d, d),
        weight("wv", d, d),
        weight("wo", d, d),
        weight("relative_bias", BUCKETS, heads),
        _constant("split_heads", [0, 0, heads, head]),
        _constant("merge_heads", [0, 0, d]),
        _constant("axes12", [1, 2]),
        _constant("one_f", 1.0, np.float32),
        _constant("lowest", np.finfo(np.float32).min, np.float32),
        *constants,
    ]
    return make_model(
        nodes,
        [
            tensor_info("input_ids", I64, ["batch", "sequence"]),
            tensor_info(mask_name, I64, ["batch", "sequence"]),
        ],
        [tensor_info("hidden", F, ["batch", "sequence", d])],
        initializers,
        opset=17,
    )


def quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` through onnxruntime's quantize_dynamic (its MatMuls as MatMulInteger)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="quantgraph-encoder-") as scratch:
        source, target = Path(scratch) / "float.onnx", Path(scratch) / "dynamic.onnx"
        onnx.save(model, source)
        quantize_dynamic(
            source, target, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"]
        )
        return onnx.load(target)
