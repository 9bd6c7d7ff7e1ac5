"""Lining per-channel parameters up with the tensor they apply to (both arithmetics)."""

from __future__ import annotations


def broadcast_shape(rank: int, axis: int | None) -> tuple[int, ...]:
    """Shape that lines a 1-D per-channel vector up with ``axis`` of a rank-``rank`` tensor."""
    if axis is None:
        return ()
    shape = [1] * rank
    shape[axis] = -1
    return tuple(shape)
