"""Tensors computed from other tensors when their bytes are needed: weights as a stream.

A pass that transforms a weight read from external data (MatMulNBits' B re-packed, its scales
transposed) makes a :class:`DerivedTensor` instead of an array. Nothing is read or computed
until the bytes are asked for — when the model is written, one tensor at a time: the source is
read, transformed, written and freed, and the source's file mapping released, so converting a
multi-GB model holds one tensor's worth of weights, not the model's. A source held in memory
is transformed at once (:func:`derived` returns a plain tensor then).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..errors import ModelError

Compute = Callable[..., np.ndarray]  # the sources' arrays -> the result's array (see derived)


def on_disk(tensor: ir.TensorProtocol | None) -> bool:
    """Whether ``tensor``'s bytes live in an external-data file (or are derived from such)."""
    return isinstance(tensor, (ir.ExternalTensor, DerivedTensor))


class DerivedTensor(ir.LazyTensor):
    """``compute(*sources' arrays)``, evaluated each time its bytes are read (never cached:
    a written weight leaves no copy behind), the sources' mappings released after each."""

    __slots__ = ("compute", "sources")

    def __init__(
        self,
        compute: Compute,
        sources: Sequence[ir.TensorProtocol],
        dtype: ir.DataType,
        shape: Sequence[int],
        name: str | None = None,
    ) -> None:
        self.compute = compute
        self.sources = tuple(sources)
        frozen = ir.Shape(list(shape))
        made = functools.partial(_evaluate, compute, self.sources, dtype, frozen)
        super().__init__(made, dtype, frozen, name=name)

    def tofile(self, file: Any) -> None:
        """Writes the result's bytes without a copy of them (onnx-ir's PackedTensor would
        make one with ``tobytes``)."""
        tensor = self._evaluate()
        if not isinstance(tensor, ir.PackedTensor):
            assert isinstance(tensor, ir.Tensor)  # what _tensor makes
            tensor.tofile(file)
            return
        packed = tensor.numpy_packed()
        if _has_fileno(file):
            packed.tofile(file)
        else:
            file.write(packed.data)


def derived(
    compute: Compute,
    sources: Sequence[ir.TensorProtocol],
    dtype: ir.DataType,
    shape: Sequence[int],
) -> ir.TensorProtocol:
    """``compute`` of the sources' arrays (:func:`stored_array`) as a tensor of ``dtype`` and
    ``shape``: a :class:`DerivedTensor` when a source is on disk, else computed now.

    ``compute`` returns, for 4-bit types, the packed bytes (uint8, ONNX's packing); for other
    types an array whose bytes are the tensor's (its dtype's size matching). It must not
    return a view of a source: the source's mapping is released after it returns."""
    if any(on_disk(source) for source in sources):
        return DerivedTensor(compute, sources, dtype, shape)
    arrays = (stored_array(source) for source in sources)
    return _tensor(compute(*arrays), dtype, ir.Shape(list(shape)))


def stored_array(tensor: ir.TensorProtocol) -> np.ndarray:
    """The tensor's values as stored: a 4-bit tensor's packed bytes (uint8, ONNX's packing:
    flat order, low nibble first; not one byte a value, twice their size), else its array."""
    if tensor.dtype.bitwidth != 4:
        return tensor.numpy()
    if isinstance(tensor, ir.LazyTensor):
        return stored_array(tensor.raw())  # the tensor it evaluates to
    if isinstance(tensor, ir.PackedTensor):
        return tensor.numpy_packed()
    return np.frombuffer(tensor.tobytes(), np.uint8)


def _evaluate(
    compute: Compute,
    sources: tuple[ir.TensorProtocol, ...],
    dtype: ir.DataType,
    shape: ir.Shape,
) -> ir.TensorProtocol:
    try:
        arrays = [stored_array(source) for source in sources]
    except (OSError, MemoryError) as error:
        where = next((s for s in sources if isinstance(s, ir.ExternalTensor)), None)
        file = f"{where.path}: " if where is not None else ""
        size = sum(source.nbytes for source in sources) / (1 << 20)
        if isinstance(error, MemoryError) or error.errno == errno.ENOMEM:
            # no room to map or read them (ulimit -v, or the machine's memory)
            raise ModelError(
                f"{file}out of memory reading the weights '{sources[0].name}' ({size:.0f} MiB) "
                "to compute what they became"
            ) from None
        # the input's data file is gone since it was read
        raise ModelError(
            f"{file}cannot read the weights '{sources[0].name}' to write what they became "
            f"({error.strerror or error}); the input's files must stay until the result is saved"
        ) from None
    result = _tensor(compute(*arrays), dtype, shape)
    del arrays
    for source in sources:
        _release(source)
    return result


def _tensor(array: np.ndarray, dtype: ir.DataType, shape: ir.Shape) -> ir.TensorProtocol:
    if dtype.bitwidth == 4:
        return ir.PackedTensor(array.view(np.uint8).reshape(-1), dtype, shape=shape)
    typed = array.view(dtype.numpy()).reshape(shape.numpy())
    return ir.Tensor(typed, dtype=dtype)


def _release(source: ir.TensorProtocol) -> None:
    """Unmaps an external source (its pages leave this process's memory; read again, it is
    mapped again). A view of it held elsewhere keeps the mapping: nothing to do then."""
    release = getattr(source, "release", None)
    if callable(release):
        with contextlib.suppress(BufferError):
            release()


def _has_fileno(file: Any) -> bool:
    try:
        file.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False
    return True
