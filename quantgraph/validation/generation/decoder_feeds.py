"""The feeds of a greedy generation with a decoder, built from its signature
(:mod:`quantgraph.validation.inputs.decoder`): a prompt of token ids inside the vocabulary, the
prefill (an empty cache: past length 0), and each later step (one new token, the cache the previous
step returned).

Batch 1, as a person generates. Every feed is consistent with the others: ``attention_mask`` is
ones over past + new tokens, ``position_ids`` (where the model takes them) count on from the
past length, and the past tensors are [1, kv_heads, past_length, head_size] in the cache's type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir

from ..inputs.decoder import DecoderSignature

Feeds = dict[str, np.ndarray]


def _numpy(dtype: ir.DataType | None, default: type[np.generic]) -> np.dtype:
    if dtype is None:
        return np.dtype(default)
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(dtype)))


@dataclass(frozen=True)
class DecoderFeeds:
    """Builds a decoder's feeds for generation; :meth:`unfit` says why it cannot (None: it can)."""

    signature: DecoderSignature
    types: Mapping[str, np.dtype]  # fed input name -> its numpy type

    @classmethod
    def of(cls, model: ir.Model, signature: DecoderSignature) -> DecoderFeeds:
        declared = {v.name: v.dtype for v in model.graph.inputs if v.name}
        names = [signature.input_ids, signature.attention_mask, signature.position_ids]
        types = {n: _numpy(declared.get(n), np.int64) for n in names if n is not None}
        for pair in signature.cache:
            types[pair.past] = _numpy(pair.dtype, np.float32)
        return cls(signature, types)

    def unfit(self) -> str | None:
        """Why no generation can be fed (an unknown vocabulary or cache layout), or None."""
        if self.signature.vocab is None:
            return (
                f"the vocabulary is unknown (the last dim of '{self.signature.logits}' is not "
                "fixed), so no prompt can be drawn inside it"
            )
        for pair in self.signature.cache:
            if pair.kv_heads is None or pair.head_size is None:
                return (
                    f"'{pair.past}' does not fix its kv_heads and head_size dims (1 and 3), so "
                    "an empty cache cannot be shaped"
                )
        return None

    def prompt(self, length: int, seed: int) -> list[int]:
        """``length`` token ids drawn uniformly inside the vocabulary from ``seed``."""
        assert self.signature.vocab is not None
        rng = np.random.default_rng(seed)
        return [int(t) for t in rng.integers(0, self.signature.vocab, length)]

    def prefill(self, prompt: Sequence[int]) -> Feeds:
        """The first step: the whole prompt, an empty cache."""
        empty = {
            pair.past: np.zeros(
                (1, pair.kv_heads or 0, 0, pair.head_size or 0), self.types[pair.past]
            )
            for pair in self.signature.cache
        }
        return self._feeds(prompt, 0, empty)

    def step(self, token: int, past_length: int, presents: Mapping[str, np.ndarray]) -> Feeds:
        """A later step: one new ``token`` after ``past_length`` positions, the cache being the
        previous step's ``present`` outputs (by present name)."""
        past = {pair.past: presents[pair.present] for pair in self.signature.cache}
        return self._feeds([token], past_length, past)

    def _feeds(
        self, tokens: Sequence[int], past_length: int, past: Mapping[str, np.ndarray]
    ) -> Feeds:
        sig = self.signature
        new = len(tokens)
        feeds: Feeds = {sig.input_ids: np.array([tokens], self.types[sig.input_ids])}
        if sig.attention_mask is not None:
            mask_type = self.types[sig.attention_mask]
            feeds[sig.attention_mask] = np.ones((1, past_length + new), mask_type)
        if sig.position_ids is not None:
            positions = np.arange(past_length, past_length + new)
            feeds[sig.position_ids] = positions[None, :].astype(self.types[sig.position_ids])
        feeds.update(past)
        return feeds
