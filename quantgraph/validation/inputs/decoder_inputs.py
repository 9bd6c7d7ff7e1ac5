"""A decoder's inputs, consistent with each other: the two steps every decoder is used in.

For a model with a KV cache (:mod:`.decoder`) the planner makes two cases instead of one:

- **prefill**: no past (every ``past_key_values.*`` of length 0) and N new tokens;
- **decode step**: a past of P tokens and 1 new token.

N is the input ids' sequence dim bound by ``--dim``, else the sequence default (128), and P is
the past's length bound by ``--dim``, else N (the step after that prefill); past + new never
exceeds the rotary cache or position table (``max_positions``). In both, ``attention_mask``
is ones over past + new tokens (what generation feeds: GroupQueryAttention reads its sum as the
sequence length), ``position_ids`` are P .. P + N - 1 in every row, token ids lie inside the
vocabulary, and the cache holds standard normal values. Every other dim is planned as for any
model (the batch: ``--dim``, else 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .decoder import DecoderSignature

PREFILL = "prefill"
DECODE = "decode step"


@dataclass(frozen=True)
class Values:
    """A role's values: [low, high], why, and ``start`` for positions (P, P + 1, ... a row)."""

    low: float
    high: float
    why: str
    start: int | None = None


@dataclass(frozen=True)
class DecoderCase:
    """One step's sizes by (input, axis) with their source, and values by input."""

    name: str
    past: int
    new: int
    sizes: dict[tuple[str, int], tuple[int, str]]
    values: dict[str, Values]

    @property
    def label(self) -> str:
        """``prefill (past 0, 128 new tokens)``, ``decode step (past 128, 1 new token)``."""
        tokens = "token" if self.new == 1 else "tokens"
        return f"{self.name} (past {self.past}, {self.new} new {tokens})"


def decoder_cases(
    signature: DecoderSignature,
    bound: Mapping[tuple[str, int], tuple[int, str]],
    sequence: tuple[int, str],
) -> list[DecoderCase]:
    """The prefill and the decode step (the module doc). ``bound``: the ``--dim`` sizes by
    (input, axis); ``sequence``: the sequence default and its source."""
    most = signature.max_positions
    new, new_from = bound.get((signature.input_ids, 1), sequence)
    if most is not None and new >= most:
        new, new_from = most - 1, f"{new_from}, at most {most - 1}: {most} positions"
    first = signature.cache[0]
    past, past_from = bound.get((first.past, first.length_axis), (new, "the prefill's tokens"))
    if most is not None and past + 1 > most:
        past, past_from = most - 1, f"{past_from}, at most {most - 1}: {most} positions"
    return [
        _case(signature, PREFILL, 0, "", new, new_from),
        _case(signature, DECODE, past, past_from, 1, ""),
    ]


def _case(
    signature: DecoderSignature, name: str, past: int, past_from: str, new: int, new_from: str
) -> DecoderCase:
    tokens = f"{new} new token{'' if new == 1 else 's'}" + (f" ({new_from})" if new_from else "")
    held = f"past {past} ({past_from})" if past_from else "no past"
    sizes: dict[tuple[str, int], tuple[int, str]] = {
        (signature.input_ids, 1): (new, f"{name}: {tokens}"),
    }
    for pair in signature.cache:
        sizes[(pair.past, pair.length_axis)] = (past, f"{name}: {held}")
    values: dict[str, Values] = {}
    if signature.attention_mask is not None:
        sizes[(signature.attention_mask, 1)] = (past + new, f"{name}: past + new = {past + new}")
        values[signature.attention_mask] = Values(1, 1, "a decoder's mask: ones over past + new")
    if signature.position_ids is not None:
        sizes[(signature.position_ids, 1)] = (new, f"{name}: {tokens}")
        values[signature.position_ids] = Values(
            past, past + new - 1, "positions of the new tokens: past .. past + new - 1", past
        )
    if signature.vocab is not None:
        values[signature.input_ids] = Values(
            0, signature.vocab - 1, f"token ids inside the vocabulary of {signature.vocab}"
        )
    return DecoderCase(name, past, new, sizes, values)
