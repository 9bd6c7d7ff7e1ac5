"""A decoder LLM as its graph declares it: token ids in, logits out, a KV cache fed back.

The forms onnxruntime-genai's builder, Olive and optimum write: ``input_ids``, an
``attention_mask`` over past + new tokens, optionally ``position_ids``, and cache pairs whose
past input and present output differ only in their prefix (``past_key_values.N.key`` ->
``present.N.key``; also ``past_key_N`` -> ``present_key_N``, ``past.N.key`` -> ``present.N.key``).
The past's declared shape gives the cache layout: [batch, kv_heads, past_length, head_size].
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx_ir as ir

from .bounds import position_rows

_PAST_PREFIXES = (("past_key_values", "present"), ("past", "present"))
_TOKENS = ("input_ids", "decoder_input_ids")
_MASKS = ("attention_mask", "decoder_attention_mask")
_POSITIONS = ("position_ids",)


@dataclass(frozen=True)
class CachePair:
    """One cache tensor: the past input fed back from the present output of the previous step.
    ``kv_heads``/``head_size``: the declared dims 1 and 3 where fixed; ``length_axis`` 2."""

    past: str
    present: str
    dtype: ir.DataType
    kv_heads: int | None
    head_size: int | None
    length_axis: int = 2


@dataclass(frozen=True)
class DecoderSignature:
    """What validation needs to feed a decoder consistently and to generate with it."""

    input_ids: str
    logits: str
    attention_mask: str | None
    position_ids: str | None
    cache: tuple[CachePair, ...]
    vocab: int | None
    max_positions: int | None

    @property
    def past_inputs(self) -> tuple[str, ...]:
        return tuple(pair.past for pair in self.cache)

    def to_dict(self) -> dict[str, object]:
        return {
            "input_ids": self.input_ids,
            "logits": self.logits,
            "attention_mask": self.attention_mask,
            "position_ids": self.position_ids,
            "cache": [pair.past for pair in self.cache],
            "vocab": self.vocab,
            "max_positions": self.max_positions,
        }


def decoder_signature(model: ir.Model) -> DecoderSignature | None:
    """The model's decoder signature, or None when it is not a decoder with a KV cache."""
    graph = model.graph
    inputs = {value.name: value for value in graph.inputs if value.name}
    outputs = {value.name: value for value in graph.outputs if value.name}
    tokens = next((name for name in _TOKENS if name in inputs), None)
    logits = "logits" if "logits" in outputs else None
    if tokens is None or logits is None:
        return None
    cache = tuple(
        pair for name, value in inputs.items() if (pair := _pair(value, outputs)) is not None
    )
    if not cache:
        return None
    return DecoderSignature(
        input_ids=tokens,
        logits=logits,
        attention_mask=next((name for name in _MASKS if name in inputs), None),
        position_ids=next((name for name in _POSITIONS if name in inputs), None),
        cache=cache,
        vocab=_vocab(outputs[logits]),
        max_positions=_max_positions(model, inputs),
    )


def _pair(value: ir.Value, outputs: dict[str, ir.Value]) -> CachePair | None:
    name = value.name or ""
    for past, present in _PAST_PREFIXES:
        if not name.startswith(past):
            continue
        candidate = re.sub(f"^{past}", present, name)
        found = outputs.get(candidate)
        if found is None or value.shape is None or len(value.shape) != 4:
            continue
        dims = [dim if isinstance(dim, int) else None for dim in value.shape]
        dtype = value.dtype if value.dtype is not None else ir.DataType.FLOAT
        return CachePair(name, candidate, dtype, dims[1], dims[3])
    return None


def _vocab(logits: ir.Value) -> int | None:
    if logits.shape is None or not len(logits.shape):
        return None
    last = logits.shape[-1]
    return last if isinstance(last, int) else None


def _max_positions(model: ir.Model, inputs: dict[str, ir.Value]) -> int | None:
    """The rows of the rotary cache (GroupQueryAttention's or RotaryEmbedding's cos_cache) or
    of a position table: how long past + new may be."""
    rows: list[int] = []
    for node in model.graph:
        if node.op_type in ("GroupQueryAttention", "RotaryEmbedding"):
            index = 7 if node.op_type == "GroupQueryAttention" else 2
            if node.domain == "" and node.op_type == "RotaryEmbedding":
                index = 1
            cos = node.inputs[index] if len(node.inputs) > index else None
            if cos is not None and cos.shape is not None and isinstance(cos.shape[0], int):
                rows.append(cos.shape[0])
    if rows:
        return min(rows)
    found = position_rows(model, list(inputs.values()))
    return None if found is None else found[0]
