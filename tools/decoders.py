"""Int4 decoder LLMs in the forms people publish, with random weights: for tests and benchmarks.

Two forms, as onnxruntime-genai's model builder and Olive write them for the CPU:

* ``builder``: per layer SkipSimplifiedLayerNormalization (com.microsoft; the first layer's norm is
  SimplifiedLayerNormalization, which onnxruntime registers in the ONNX domain), one packed-QKV
  MatMulNBits, GroupQueryAttention with rotary inside it (cos/sin caches, ``seqlens_k`` and
  ``total_sequence_length`` computed from ``attention_mask``), MatMulNBits for o_proj, gate, up and
  down with SiLU written as Sigmoid * x; ``logits`` from a MatMulNBits lm_head.
* ``olive``: the same with separate q/k/v MatMulNBits, a ``position_ids`` input and
  com.microsoft RotaryEmbedding on q and k before GroupQueryAttention (``do_rotary=0``).

Inputs ``input_ids``, ``attention_mask`` (``position_ids``), ``past_key_values.N.key/value``
[batch_size, kv_heads, past_sequence_length, head_size]; outputs ``logits``,
``present.N.key/value``.
Weights are random int4 codes with scales chosen so activations stay of order one.
:func:`write_decoder` streams them into one external data file, one tensor at a time, so the
TinyLlama-1.1B and Phi-3-mini shapes are written in the memory of their largest tensor.

    python -m tools.decoders OUT.onnx --preset tinyllama-1.1b
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper

MS = "com.microsoft"
OPSET = 21
STYLES = ("builder", "olive")
DTYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
_CONTRIB = frozenset(
    (
        "MatMulNBits",
        "GroupQueryAttention",
        "RotaryEmbedding",
        "SkipSimplifiedLayerNormalization",
        "GatherBlockQuantized",
    )
)
_ALIGN = 4096  # external data offsets, as onnx's own writer aligns large tensors


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder's shape and how it is quantized and written."""

    layers: int = 2
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    vocab: int = 256
    max_positions: int = 256
    block_size: int = 32
    zero_points: bool = False
    accuracy_level: int = 4
    dtype: str = "float32"
    rotary: bool = True
    tied_embeddings: bool = False
    style: str = "builder"
    epsilon: float = 1e-5

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style {self.style!r}: one of {', '.join(STYLES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: one of {', '.join(DTYPES)}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError("hidden must divide by heads, heads by kv_heads")
        if self.tied_embeddings and self.hidden % self.block_size:
            raise ValueError("tied embeddings need hidden to divide by block_size")

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads

    @property
    def position_ids(self) -> bool:
        """Olive's form takes positions as an input (for its RotaryEmbedding nodes)."""
        return self.style == "olive" and self.rotary

    def replace(self, **changes: object) -> DecoderConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def weight_bytes(self) -> int:
        """Bytes of the quantized weights (codes, scales, zero points) and float tables."""
        return sum(len(t.raw_data) or _external_length(t) for t in _Writer(self, 0).dry_run())


TINY = DecoderConfig()
TINYLLAMA_1_1B = DecoderConfig(
    layers=22, hidden=2048, heads=32, kv_heads=4, intermediate=5632, vocab=32000, max_positions=2048
)
PHI3_MINI = DecoderConfig(
    layers=32,
    hidden=3072,
    heads=32,
    kv_heads=32,
    intermediate=8192,
    vocab=32064,
    max_positions=4096,
)
PRESETS = {"tiny": TINY, "tinyllama-1.1b": TINYLLAMA_1_1B, "phi3-mini": PHI3_MINI}


def decoder_proto(config: DecoderConfig = TINY, seed: int = 0) -> onnx.ModelProto:
    """The decoder with its weights inside the proto (small shapes only)."""
    writer = _Writer(config, seed)
    return writer.model(list(writer.tensors()))


def write_decoder(
    path: str | os.PathLike[str], config: DecoderConfig = TINY, seed: int = 0
) -> Path:
    """Write the decoder to ``path`` with its weights in ``<name>.data`` beside it, one tensor at
    a time (never the whole model in memory)."""
    target = Path(path)
    data_name = target.name + ".data"
    writer = _Writer(config, seed)
    tensors = []
    with open(target.parent / data_name, "wb") as data:
        for tensor in writer.tensors():
            tensors.append(_externalize(tensor, data, data_name))
    model = writer.model(tensors)
    with open(target, "wb") as out:
        out.write(model.SerializeToString())
    return target


def _externalize(tensor: TensorProto, data: BinaryIO, location: str) -> TensorProto:
    offset = data.tell()
    if offset % _ALIGN:
        data.write(b"\0" * (_ALIGN - offset % _ALIGN))
        offset = data.tell()
    data.write(tensor.raw_data)
    length = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _external_length(tensor: TensorProto) -> int:
    return next((int(e.value) for e in tensor.external_data if e.key == "length"), 0)


class _Writer:
    """Nodes and tensors of one decoder; tensors are made one at a time, in a fixed order."""

    def __init__(self, config: DecoderConfig, seed: int) -> None:
        self.c = config
        self.seed = seed
        self.nodes: list[onnx.NodeProto] = []
        self._specs: list[tuple[str, str, tuple[int, ...]]] = []  # name, kind, args
        self._build_graph()

    # -- tensors ---------------------------------------------------------------------------
    def tensors(self) -> Iterator[TensorProto]:
        for index, (name, kind, args) in enumerate(self._specs):
            yield self._make(index, name, kind, args)

    def _make(self, index: int, name: str, kind: str, args: tuple[int, ...]) -> TensorProto:
        if kind in ("table_of", "copy_of"):  # the bytes of another tensor (tied embeddings)
            source = args[0]
            _, source_kind, source_args = self._specs[source]
            made = self._make(source, name, source_kind, source_args)
            if kind == "table_of":
                del made.dims[:]
                made.dims.extend([args[1], self.c.hidden // 2])
            return made
        rng = np.random.default_rng([self.seed, index])
        made_tensor: TensorProto = getattr(self, "_make_" + kind)(rng, name, *args)
        return made_tensor

    def dry_run(self) -> Iterator[TensorProto]:
        """Tensors with their sizes but without data (for byte counts)."""
        for name, kind, args in self._specs:
            while kind in ("table_of", "copy_of"):
                _, kind, args = self._specs[args[0]]
            size = self._size(kind, args)
            tensor = TensorProto(name=name)
            entry = tensor.external_data.add()
            entry.key, entry.value = "length", str(size)
            yield tensor

    def _size(self, kind: str, args: tuple[int, ...]) -> int:
        width = 2 if self.c.dtype == "float16" else 4
        if kind == "nbits":
            k, n = args[0], args[1]
            blocks = -(-k // self.c.block_size)
            return n * blocks * self.c.block_size // 2
        if kind == "scales":
            k, n = args[0], args[1]
            return n * -(-k // self.c.block_size) * width
        if kind == "zero_points":
            k, n = args[0], args[1]
            blocks = -(-k // self.c.block_size)
            return n * ((blocks + 1) // 2)
        if kind in ("table", "cache"):
            rows, cols = args[0], args[1]
            return rows * cols * width
        if kind == "norm":
            return args[0] * width
        raise AssertionError(kind)

    def _float(self, array: np.ndarray, name: str) -> TensorProto:
        dtype = np.float16 if self.c.dtype == "float16" else np.float32
        return _raw(name, np.ascontiguousarray(array, dtype=dtype), DTYPES[self.c.dtype])

    def _make_nbits(self, rng: np.random.Generator, name: str, k: int, n: int) -> TensorProto:
        blocks = -(-k // self.c.block_size)
        blob = self.c.block_size // 2
        codes = rng.integers(0, 256, size=(n, blocks, blob), dtype=np.uint8)
        if k % self.c.block_size:  # a short last block is padded with zero codes, as producers do
            pad_from = (k % self.c.block_size) // 2
            codes[:, -1, pad_from:] = 0
        return _raw(name, codes, TensorProto.UINT8)

    def _make_scales(self, rng: np.random.Generator, name: str, k: int, n: int) -> TensorProto:
        blocks = -(-k // self.c.block_size)
        # codes spread with std ~4.6 around the zero point: weights of std ~1/sqrt(K)
        scales = rng.uniform(0.5, 1.5, size=(n, blocks)) / (4.6 * math.sqrt(k))
        return self._float(scales, name)

    def _make_zero_points(self, rng: np.random.Generator, name: str, k: int, n: int) -> TensorProto:
        blocks = -(-k // self.c.block_size)
        points = rng.integers(6, 11, size=(n, blocks + blocks % 2), dtype=np.uint8)
        packed = (points[:, 0::2] | (points[:, 1::2] << 4)).astype(np.uint8)
        return _raw(name, packed, TensorProto.UINT8)

    def _make_table(self, rng: np.random.Generator, name: str, rows: int, cols: int) -> TensorProto:
        return self._float(rng.standard_normal((rows, cols), dtype=np.float32), name)

    def _make_norm(self, rng: np.random.Generator, name: str, size: int) -> TensorProto:
        return self._float(rng.uniform(0.8, 1.2, size=size), name)

    def _make_cache(self, rng: np.random.Generator, name: str, rows: int, cols: int) -> TensorProto:
        del rng
        inverse = 1.0 / (10000.0 ** (np.arange(cols, dtype=np.float64) * 2 / (2 * cols)))
        angles = np.outer(np.arange(rows, dtype=np.float64), inverse)
        return self._float(np.cos(angles) if name.endswith("cos_cache") else np.sin(angles), name)

    # -- graph -----------------------------------------------------------------------------
    def _tensor(self, name: str, kind: str, *args: int) -> str:
        self._specs.append((name, kind, args))
        return name

    def _node(
        self, op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, **attrs: Any
    ) -> None:
        # ONNX-domain nodes leave the domain field unset, as exporters write them
        domain = MS if op in _CONTRIB else None
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))

    def _matmul(self, prefix: str, x: str, k: int, n: int, out: str) -> None:
        weight = f"{prefix}.MatMul.weight_Q4"
        inputs = [
            self._tensor(weight, "nbits", k, n),
            self._tensor(f"{prefix}.MatMul.weight_scales", "scales", k, n),
        ]
        if self.c.zero_points:
            inputs.append(self._tensor(f"{prefix}.MatMul.weight_zero_points", "zero_points", k, n))
        self._node(
            "MatMulNBits",
            [x, *inputs],
            [out],
            f"/{prefix.replace('.', '/')}/MatMul_Q4",
            K=k,
            N=n,
            bits=4,
            block_size=self.c.block_size,
            accuracy_level=self.c.accuracy_level,
        )

    def _build_graph(self) -> None:
        c = self.c
        kv_width = c.kv_heads * c.head_size
        if c.tied_embeddings:
            # the lm_head's quantized weight is the embedding table: GatherBlockQuantized reads it
            self._matmul_weights_for_tied()
        else:
            table = self._tensor("model.embed_tokens.weight", "table", c.vocab, c.hidden)
            self._node("Gather", [table, "input_ids"], ["embeds"], "/model/embed_tokens/Gather")
        # seqlens_k = sum(mask) - 1 and total_sequence_length = mask's length, as the builder does
        base = "/model/attn_mask_reformat/attn_mask_subgraph"
        self.nodes += [
            helper.make_node(
                "ReduceSum",
                ["attention_mask", "one_axis"],
                ["mask_sum"],
                name=f"{base}/ReduceSum",
                keepdims=0,
            ),
            helper.make_node(
                "Sub", ["mask_sum", "one_i64"], ["mask_minus_one"], name=f"{base}/Sub"
            ),
            helper.make_node(
                "Cast", ["mask_minus_one"], ["seqlens_k"], name=f"{base}/Cast", to=TensorProto.INT32
            ),
            helper.make_node("Shape", ["attention_mask"], ["mask_shape"], name=f"{base}/Shape"),
            helper.make_node(
                "Gather", ["mask_shape", "one_i64"], ["total_i64"], name=f"{base}/Gather", axis=0
            ),
            helper.make_node(
                "Cast",
                ["total_i64"],
                ["total_sequence_length"],
                name=f"{base}/Cast_1",
                to=TensorProto.INT32,
            ),
        ]
        if c.rotary:
            self._tensor("cos_cache", "cache", c.max_positions, c.head_size // 2)
            self._tensor("sin_cache", "cache", c.max_positions, c.head_size // 2)
        residual = "embeds"
        previous = ""
        for i in range(c.layers):
            prefix = f"model.layers.{i}"
            normed = f"/{prefix}/input_layernorm/output_0"
            gamma = self._tensor(f"{prefix}.input_layernorm.weight", "norm", c.hidden)
            if i == 0:
                self._node(
                    "SimplifiedLayerNormalization",
                    [residual, gamma],
                    [normed],
                    f"/{prefix}/input_layernorm/LayerNorm",
                    axis=-1,
                    epsilon=c.epsilon,
                    stash_type=1,
                )
            else:
                summed = f"/{prefix}/input_layernorm/output_3"
                self._node(
                    "SkipSimplifiedLayerNormalization",
                    [previous, residual, gamma],
                    [normed, "", "", summed],
                    f"/{prefix}/input_layernorm/SkipLayerNorm",
                    epsilon=c.epsilon,
                )
                residual = summed
            attention = self._attention(prefix, normed, kv_width, i)
            o_proj = f"/{prefix}/attn/o_proj/output_0"
            self._matmul(f"{prefix}.attn.o_proj", attention, c.hidden, c.hidden, o_proj)
            post = f"/{prefix}/post_attention_layernorm/output_0"
            post_sum = f"/{prefix}/post_attention_layernorm/output_3"
            gamma = self._tensor(f"{prefix}.post_attention_layernorm.weight", "norm", c.hidden)
            self._node(
                "SkipSimplifiedLayerNormalization",
                [o_proj, residual, gamma],
                [post, "", "", post_sum],
                f"/{prefix}/post_attention_layernorm/SkipLayerNorm",
                epsilon=c.epsilon,
            )
            residual = post_sum
            previous = self._mlp(prefix, post)
        final = "/model/norm/output_0"
        gamma = self._tensor("model.norm.weight", "norm", c.hidden)
        self._node(
            "SkipSimplifiedLayerNormalization",
            [previous, residual, gamma],
            [final, "", "", ""],
            "/model/norm/SkipLayerNorm",
            epsilon=c.epsilon,
        )
        if c.tied_embeddings:
            self._node(
                "MatMulNBits",
                [final, *self._tied],
                ["logits"],
                "/lm_head/MatMul_Q4",
                K=c.hidden,
                N=c.vocab,
                bits=4,
                block_size=c.block_size,
                accuracy_level=c.accuracy_level,
            )
        else:
            self._matmul("lm_head", final, c.hidden, c.vocab, "logits")

    def _matmul_weights_for_tied(self) -> None:
        c = self.c
        weight = self._tensor("lm_head.MatMul.weight_Q4", "nbits", c.hidden, c.vocab)
        scales = self._tensor("lm_head.MatMul.weight_scales", "scales", c.hidden, c.vocab)
        self._tied = [weight, scales]
        if c.zero_points:
            self._tied.append(
                self._tensor("lm_head.MatMul.weight_zero_points", "zero_points", c.hidden, c.vocab)
            )
        # the same codes, scales and zero points as GatherBlockQuantized's [vocab, hidden / 2]
        # table (its own initializers with the lm_head's bytes: onnxruntime wants a constant table)
        source = len(self._specs) - len(self._tied)
        table = self._tensor("model.embed_tokens.weight_Q4", "table_of", source, c.vocab)
        copies = [
            self._tensor(f"model.embed_tokens.weight_{part}", "copy_of", source + offset)
            for offset, part in enumerate(("scales", "zero_points")[: len(self._tied) - 1], 1)
        ]
        self._node(
            "GatherBlockQuantized",
            [table, "input_ids", *copies],
            ["embeds"],
            "/model/embed_tokens/GatherBlockQuantized",
            gather_axis=0,
            quantize_axis=1,
            block_size=c.block_size,
            bits=4,
        )

    def _attention(self, prefix: str, x: str, kv_width: int, layer: int) -> str:
        c = self.c
        past = [f"past_key_values.{layer}.key", f"past_key_values.{layer}.value"]
        present = [f"present.{layer}.key", f"present.{layer}.value"]
        out = f"/{prefix}/attn/GroupQueryAttention/output_0"
        rotary = ["cos_cache", "sin_cache"] if c.rotary else []
        if c.style == "builder":
            qkv = f"/{prefix}/attn/qkv_proj/output_0"
            self._matmul(f"{prefix}.attn.qkv_proj", x, c.hidden, c.hidden + 2 * kv_width, qkv)
            query = [qkv, "", ""]
            do_rotary = int(c.rotary)
        else:
            query = []
            for name, width in (("q", c.hidden), ("k", kv_width), ("v", kv_width)):
                projected = f"/{prefix}/attn/{name}_proj/output_0"
                self._matmul(f"{prefix}.attn.{name}_proj", x, c.hidden, width, projected)
                if c.rotary and name != "v":
                    rotated = f"/{prefix}/attn/{name}_rotary/output_0"
                    self._node(
                        "RotaryEmbedding",
                        [projected, "position_ids", *rotary],
                        [rotated],
                        f"/{prefix}/attn/{name}_rotary/RotaryEmbedding",
                        num_heads=c.heads if name == "q" else c.kv_heads,
                        interleaved=0,
                    )
                    projected = rotated
                query.append(projected)
            do_rotary = 0
            rotary = []
        self._node(
            "GroupQueryAttention",
            [*query, *past, "seqlens_k", "total_sequence_length", *rotary],
            [out, *present],
            f"/{prefix}/attn/GroupQueryAttention",
            num_heads=c.heads,
            kv_num_heads=c.kv_heads,
            do_rotary=do_rotary,
            scale=1.0 / math.sqrt(c.head_size),
            local_window_size=-1,
            rotary_interleaved=0,
        )
        return out

    def _mlp(self, prefix: str, x: str) -> str:
        c = self.c
        gate, up = f"/{prefix}/mlp/gate_proj/output_0", f"/{prefix}/mlp/up_proj/output_0"
        self._matmul(f"{prefix}.mlp.gate_proj", x, c.hidden, c.intermediate, gate)
        self._matmul(f"{prefix}.mlp.up_proj", x, c.hidden, c.intermediate, up)
        sigmoid, act, product = (f"/{prefix}/mlp/act_fn/{n}" for n in ("Sigmoid", "Mul", "Mul_1"))
        self.nodes += [
            helper.make_node("Sigmoid", [gate], [sigmoid + "/output_0"], name=sigmoid),
            helper.make_node("Mul", [gate, sigmoid + "/output_0"], [act + "/output_0"], name=act),
            helper.make_node("Mul", [act + "/output_0", up], [product + "/output_0"], name=product),
        ]
        down = f"/{prefix}/mlp/down_proj/output_0"
        self._matmul(
            f"{prefix}.mlp.down_proj", product + "/output_0", c.intermediate, c.hidden, down
        )
        return down

    def model(self, tensors: list[TensorProto]) -> onnx.ModelProto:
        c = self.c
        element = DTYPES[c.dtype]
        batch, sequence = "batch_size", "sequence_length"
        inputs = [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, sequence]),
            helper.make_tensor_value_info(
                "attention_mask", TensorProto.INT64, [batch, "total_sequence_length"]
            ),
        ]
        if c.position_ids:
            inputs.append(
                helper.make_tensor_value_info("position_ids", TensorProto.INT64, [batch, sequence])
            )
        outputs = [helper.make_tensor_value_info("logits", element, [batch, sequence, c.vocab])]
        for i in range(c.layers):
            for part in ("key", "value"):
                inputs.append(
                    helper.make_tensor_value_info(
                        f"past_key_values.{i}.{part}",
                        element,
                        [batch, c.kv_heads, "past_sequence_length", c.head_size],
                    )
                )
                outputs.append(
                    helper.make_tensor_value_info(
                        f"present.{i}.{part}",
                        element,
                        [batch, c.kv_heads, "total_sequence_length", c.head_size],
                    )
                )
        constants = [
            helper.make_tensor("one_axis", TensorProto.INT64, [1], [1]),
            helper.make_tensor("one_i64", TensorProto.INT64, [], [1]),
        ]
        graph = helper.make_graph(
            self.nodes, "main_graph", inputs, outputs, initializer=[*tensors, *constants]
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
            producer_name="quantgraph tools.decoders",
        )
        model.ir_version = 10
        return model


def _raw(name: str, array: np.ndarray, element: int) -> TensorProto:
    tensor = TensorProto(name=name, data_type=element, dims=list(array.shape))
    tensor.raw_data = np.ascontiguousarray(array).tobytes()
    return tensor


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the .onnx file (weights go to OUT.data)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--layers", type=int, help="override the preset's layer count")
    parser.add_argument("--style", choices=STYLES, default="builder")
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--accuracy-level", type=int, default=4)
    parser.add_argument("--zero-points", action="store_true")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = PRESETS[args.preset].replace(
        style=args.style,
        block_size=args.block_size,
        accuracy_level=args.accuracy_level,
        zero_points=args.zero_points,
        dtype=args.dtype,
    )
    if args.layers:
        config = config.replace(layers=args.layers)
    write_decoder(args.out, config, args.seed)
    size = (args.out.parent / (args.out.name + ".data")).stat().st_size
    print(
        f"{args.out}: {config.layers} layers, hidden {config.hidden}, {size / 2**30:.2f} GiB data"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
