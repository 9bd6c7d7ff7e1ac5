"""onnxruntime's packed N-bit layouts (MatMulNBits, GatherBlockQuantized) <-> plain arrays.

MatMulNBits' B is uint8 [N, k_blocks, blob_size]: each row n holds K (padded to whole blocks)
values packed low bits first; packed zero points are uint8 [N, ceil(k_blocks * bits / 8)] the
same way. Unpacking then packing gives the same bytes back (the padding values included), which
is what lets ``lower`` restore the original initializers byte for byte.

:func:`unpack` and :func:`pack` are the plain definitions. The weights themselves go through
:func:`standard_weight` and :func:`unpacked_rows`: the same results, computed a chunk of rows at a
time in whole-word numpy operations (a 1.1B-parameter model's weights are re-packed in about a
second, where unpack -> transpose -> pack took twenty, through several full copies).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx_ir as ir

BITS = (4, 8)  # the widths the spec has (u4/s4, u8/s8); MatMulNBits also has 2

# Output bytes a step of the chunked transforms: temporaries stay in the caches.
CHUNK_BYTES = 1 << 21
_LOW = np.uint64(0x0F0F0F0F0F0F0F0F)
_HIGH = np.uint64(0xF0F0F0F0F0F0F0F0)
_FOUR = np.uint64(4)


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


def standard_weight(
    packed: np.ndarray,
    n: int,
    padded: int,
    bits: int,
    signed: bool,
    *,
    chunk: int = CHUNK_BYTES,
) -> np.ndarray:
    """MatMulNBits' B (``n * padded * bits / 8`` uint8 bytes, row n holding K's ``padded``
    values) as the bytes of the standard [padded, n] tensor of ``bits`` (ONNX's packing: flat
    order, low nibble first), 2^(bits-1) subtracted when ``signed`` (two's complement).

    The bytes ``pack(unpack(B).T - 2^(bits-1) * signed)`` are, as uint8 [padded * n * bits / 8].
    Nothing of B's size is allocated but the result, ``chunk`` bytes of it made a step; B may
    be a read-only map of a file."""
    if bits not in BITS or padded * bits % 8:
        raise ValueError(f"{bits}-bit values, {padded} a row: not whole bytes of 4 or 8 bits")
    stored = np.asarray(packed)
    if stored.dtype.itemsize == 1:  # int8 or uint8 bytes: the same bytes, not a converted copy
        stored = stored.view(np.uint8)
    rows = np.asarray(stored, np.uint8).reshape(n, padded * bits // 8)
    if bits == 8:
        return _transposed(rows, 0x80 if signed else 0, chunk).reshape(-1)
    if rows.shape[1] % 8 == 0 and n % 2 == 0:
        return _nibbles_transposed_words(rows, signed, chunk).reshape(-1)
    return _nibbles_transposed(rows, signed, chunk).reshape(-1)


def matmul_nbits_bytes(
    standard: np.ndarray,
    n: int,
    padded: int,
    bits: int,
    signed: bool,
    *,
    chunk: int = CHUNK_BYTES,
) -> np.ndarray:
    """The inverse of :func:`standard_weight`: the standard [padded, n] tensor's stored bytes
    (packed for 4 bits) -> MatMulNBits' B bytes, uint8 [n * padded * bits / 8], 2^(bits-1)
    added back when ``signed``. The same nibble transpose the other way, where the standard
    tensor's rows are whole bytes (n * bits % 8 == 0); else unpacked and packed again."""
    if n * bits % 8 == 0:
        return standard_weight(standard, padded, n, bits, signed, chunk=chunk)
    values = unpack(np.asarray(standard, np.uint8).reshape(-1), bits, padded * n)
    if signed:
        values ^= np.uint8(default_zero_point(bits))
    return pack(values.reshape(padded, n).T, bits, padded * bits // 8).reshape(-1)


def _rows_a_step(chunk: int, width: int) -> int:
    return max(1, chunk // max(width, 1))


def _transposed(rows: np.ndarray, flip: int, chunk: int) -> np.ndarray:
    """uint8 [n, m] -> uint8 [m, n], each byte XOR ``flip``. Whole 8-byte words are moved where
    m allows (a byte transpose moves one byte per step: 8x slower), then spread in cache."""
    n, m = rows.shape
    out = np.empty((m, n), np.uint8)
    if m % 8:
        step = _rows_a_step(chunk, n)
        for start in range(0, m, step):
            part = out[start : start + step]
            np.copyto(part, rows[:, start : start + step].T)
            if flip:
                part ^= np.uint8(flip)
        return out
    words = rows.view(np.uint64)  # [n, m / 8]
    spread = out.reshape(m // 8, 8, n)
    step = max(8, _rows_a_step(chunk, 8 * n))  # >= 64 bytes read from each row
    flip_word = np.uint64(flip * 0x0101010101010101)
    for start in range(0, m // 8, step):
        block = words[:, start : start + step].T.copy()  # [r, n] words, never a view of B
        if flip:
            block ^= flip_word
        count = block.shape[0]
        np.copyto(
            spread[start : start + count], block.view(np.uint8).reshape(count, n, 8).swapaxes(1, 2)
        )
    return out


def _nibbles_transposed_words(rows: np.ndarray, signed: bool, chunk: int) -> np.ndarray:
    """4-bit B rows [n, m] (m % 8 == 0, n even) -> the standard [2m, n] tensor's bytes.

    Output byte (k, columns 2p, 2p+1) holds nibble k of rows 2p and 2p+1: for even k the low
    nibbles of their byte k/2, for odd k the high ones. On 8-byte words of both rows at once:
    even = (x & 0x0F..) | (y & 0x0F..) << 4, odd = (x >> 4) & 0x0F.. | (y & 0xF0..), each
    word's byte r going to output row 8j + r."""
    n, m = rows.shape
    half = n // 2
    out = np.empty((m // 8, 8, 2, half), np.uint8)  # [word j, byte r, even/odd k, p]
    words = rows.view(np.uint64)  # [n, m / 8]
    step = max(8, _rows_a_step(chunk, 8 * n))
    flip = np.uint64(0x8888888888888888)
    for start in range(0, m // 8, step):
        block = np.ascontiguousarray(words[:, start : start + step].T)  # [r, n]
        count = block.shape[0]
        x, y = block[:, 0::2], block[:, 1::2]
        even = x & _LOW
        even |= (y & _LOW) << _FOUR
        odd = (x >> _FOUR) & _LOW
        odd |= y & _HIGH
        for index, made in enumerate((even, odd)):
            if signed:
                made ^= flip
            spread = made.view(np.uint8).reshape(count, half, 8).swapaxes(1, 2)
            np.copyto(out[start : start + count, :, index, :], spread)
    return out


def _nibbles_transposed(rows: np.ndarray, signed: bool, chunk: int) -> np.ndarray:
    """4-bit B rows [n, m] -> the standard [2m, n] tensor's bytes, any n: output rows 2i, 2i+1
    (n bytes, 2n nibbles) hold row i's low nibbles of all n rows of B, then its high ones."""
    n, m = rows.shape
    out = np.empty((m, n), np.uint8)
    step = _rows_a_step(chunk, 2 * n)
    for start in range(0, m, step):
        column = rows[:, start : start + step].T  # [r, n]
        nibbles = np.empty((column.shape[0], 2 * n), np.uint8)
        np.bitwise_and(column, 0x0F, out=nibbles[:, :n])
        np.right_shift(column, 4, out=nibbles[:, n:])
        part = out[start : start + column.shape[0]]
        np.left_shift(nibbles[:, 1::2], 4, out=part)
        part |= nibbles[:, 0::2]
        if signed:
            part ^= np.uint8(0x88)
    return out


def unpacked_rows(packed: np.ndarray, bits: int, width: int, signed: bool) -> np.ndarray:
    """uint8 bytes [..., m] -> uint8 values [..., width] (``unpack`` then zeros past its
    m * 8 / bits values), 2^(bits-1) subtracted from the values (wrapping: int8 as uint8)
    when ``signed``; the padding stays 0."""
    packed = np.asarray(packed, np.uint8)
    count = packed.shape[-1] * 8 // bits
    if bits not in BITS or width < count:
        raise ValueError(f"{bits}-bit values: {count} a row do not fit {width}")
    out = np.empty((*packed.shape[:-1], width), np.uint8)
    out[..., count:] = 0
    values = out[..., :count]
    if bits == 8:
        np.bitwise_xor(packed, np.uint8(0x80 if signed else 0), out=values)
        return out
    pairs = values.reshape(*packed.shape, 2)
    np.bitwise_and(packed, 0x0F, out=pairs[..., 0])
    np.right_shift(packed, 4, out=pairs[..., 1])
    if signed:
        values -= np.uint8(default_zero_point(bits))  # uint8 arithmetic wraps: int8's bytes
    return out


def onnx_type(bits: int, signed: bool) -> ir.DataType:
    """The standard tensor type of ``bits``-bit values: INT4/UINT4/INT8/UINT8."""
    return _TYPES[signed, bits]


_TYPES = {
    (True, 4): ir.DataType.INT4,
    (False, 4): ir.DataType.UINT4,
    (True, 8): ir.DataType.INT8,
    (False, 8): ir.DataType.UINT8,
}


def unsigned_type(bits: int) -> type:
    return ml_dtypes.uint4 if bits == 4 else np.uint8


def signed_type(bits: int) -> type:
    return ml_dtypes.int4 if bits == 4 else np.int8


def default_zero_point(bits: int) -> int:
    """MatMulNBits' zero point when there is none: 2^(bits-1) (ONNX's DequantizeLinear: 0)."""
    return 1 << (bits - 1)
