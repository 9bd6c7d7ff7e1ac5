"""onnxruntime's packed N-bit layouts (MatMulNBits, GatherBlockQuantized) <-> plain arrays.

MatMulNBits' B is uint8 [N, k_blocks, blob_size]: each row n holds K (padded to whole blocks)
values packed low bits first; packed zero points are uint8 [N, ceil(k_blocks * bits / 8)] the
same way. Unpacking then packing gives the same bytes back (the padding values included), which
is what lets ``lower`` restore the original initializers byte for byte.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

BITS = (4, 8)  # the widths the spec has (u4/s4, u8/s8); MatMulNBits also has 2


def unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """uint8 bytes [..., m] -> uint8 values [..., count], low bits first."""
    packed = np.asarray(packed, np.uint8)
    if bits == 8:
        return packed[..., :count].copy()
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (packed[..., None] >> shifts) & mask
    flat = values.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)
    return flat[..., :count].astype(np.uint8)


def pack(values: np.ndarray, bits: int, width: int) -> np.ndarray:
    """uint8 values [..., count] -> uint8 bytes [..., width] (zero-filled past count)."""
    values = np.asarray(values, np.uint8)
    if bits == 8:
        out = np.zeros((*values.shape[:-1], width), np.uint8)
        out[..., : values.shape[-1]] = values
        return out
    per_byte = 8 // bits
    padded = np.zeros((*values.shape[:-1], width * per_byte), np.uint8)
    padded[..., : values.shape[-1]] = values
    grouped = padded.reshape(*values.shape[:-1], width, per_byte).astype(np.uint16)
    shifts = (np.arange(per_byte, dtype=np.uint16) * bits).astype(np.uint16)
    packed: np.ndarray = (grouped << shifts).sum(axis=-1).astype(np.uint8)
    return packed


def unsigned_type(bits: int) -> type:
    return ml_dtypes.uint4 if bits == 4 else np.uint8


def signed_type(bits: int) -> type:
    return ml_dtypes.int4 if bits == 4 else np.int8


def default_zero_point(bits: int) -> int:
    """MatMulNBits' zero point when there is none: 2^(bits-1) (ONNX's DequantizeLinear: 0)."""
    return 1 << (bits - 1)
