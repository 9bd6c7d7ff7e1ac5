"""One equality rule for every report: validation, conformance and the fuzzer use it.

* Integer and boolean tensors (s8, u8, s32, int4, ...) are equal where their values are.
* Floating tensors (f32, f16, bf16, float8, ...) are equal where their bit patterns are, except
  that any two NaNs are equal whatever their payload or sign. So ``-0`` and ``+0`` differ: a
  bit-exact kernel gives the same zero as its reference. Such a pair counts as a mismatch with
  an absolute difference of 0 and an ulp difference of 0.
* Arrays arrive as numpy types (ml_dtypes for float8 and 4-bit) or, from onnxruntime's Python
  API, as raw uint8 bit patterns of a float8 output. ``elem_type`` (the ONNX element type the
  model declares) says what they are; reports name that type and measure differences in its own
  units (a float8 difference of 0.25 is 0.25, not 8 bit patterns).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import onnx


@dataclass(frozen=True)
class TensorComparison:
    """How far two tensors of one name agree."""

    name: str
    dtype: str  # numpy's type name: float32, float8_e4m3fn, uint8, ... ("a vs b" when they differ)
    shape: list[int]
    elements: int
    mismatches: int
    max_abs_diff: float
    max_ulp_diff: int  # -1 when shapes or types differ
    first_mismatch: int | None = None  # flat index of the first differing element
    # Comparisons with a tolerance (atol, rtol): differing elements with
    # |expected - actual| > atol + rtol * |expected|. None: an exact comparison.
    beyond_tolerance: int | None = None

    @property
    def agree(self) -> bool:
        return self.mismatches == 0

    @property
    def within_tolerance(self) -> bool:
        """Every element agrees, or differs by no more than the tolerance asked for."""
        return self.agree if self.beyond_tolerance is None else self.beyond_tolerance == 0

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {**asdict(self), "agree": self.agree}
        if self.beyond_tolerance is None:
            del found["beyond_tolerance"]
        else:
            found["within_tolerance"] = self.within_tolerance
        return found


def merge(first: TensorComparison, second: TensorComparison) -> TensorComparison:
    """One comparison over two samples of the same tensor (``first_mismatch`` then counts
    elements across the samples in order)."""
    later = None if second.first_mismatch is None else first.elements + second.first_mismatch
    beyond = None
    if first.beyond_tolerance is not None and second.beyond_tolerance is not None:
        beyond = first.beyond_tolerance + second.beyond_tolerance
    ulps = (
        -1
        if -1 in (first.max_ulp_diff, second.max_ulp_diff)
        else max(first.max_ulp_diff, second.max_ulp_diff)
    )
    return TensorComparison(
        first.name,
        first.dtype if first.dtype == second.dtype else f"{first.dtype} / {second.dtype}",
        first.shape,
        first.elements + second.elements,
        first.mismatches + second.mismatches,
        max(first.max_abs_diff, second.max_abs_diff),
        ulps,
        first.first_mismatch if first.first_mismatch is not None else later,
        beyond,
    )


def type_name(dtype: np.dtype) -> str:
    """numpy's name of a type ("float32", ml_dtypes' "float8_e4m3fn"): the one spelling every
    report and every command's JSON uses."""
    return str(np.dtype(dtype))


def typed(array: object, elem_type: int | None = None) -> np.ndarray:
    """``array`` as a numpy array of the ONNX type ``elem_type`` (raw bit patterns reinterpreted,
    never converted); as it is when no type is given or the types already agree."""
    result = np.asarray(array)
    if not elem_type:
        return result
    wanted = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    if result.dtype == wanted or result.dtype.itemsize != wanted.itemsize:
        return result
    return result.view(wanted)


def mismatch_mask(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Flat mask of differing elements (same shape and type assumed; see the module doc)."""
    if _is_float(expected.dtype):
        differ = _bits(expected) != _bits(actual)
        with np.errstate(invalid="ignore"):  # NaN payloads warn as they widen
            wide_e, wide_a = expected.astype(np.float64), actual.astype(np.float64)
        differ &= ~(np.isnan(wide_e) & np.isnan(wide_a))
    else:
        differ = expected != actual
    return np.asarray(differ).reshape(-1)


def compare(
    name: str,
    expected: object,
    actual: object,
    elem_type: int | None = None,
    *,
    tolerance: tuple[float, float] | None = None,
) -> TensorComparison:
    """Compare two tensors by the rule of this module; ``elem_type``: the declared ONNX type.

    ``tolerance=(atol, rtol)`` also counts the differing elements beyond it (for comparisons
    not meant to be exact); the mismatch count stays exact.
    """
    want, got = typed(expected, elem_type), typed(actual, elem_type)
    shape = list(want.shape)
    if want.shape != got.shape or want.dtype != got.dtype:
        dtype = f"{type_name(want.dtype)} vs {type_name(got.dtype)}"
        if want.dtype == got.dtype:
            dtype = f"{type_name(want.dtype)}, shape {list(got.shape)} vs {shape}"
        count = int(max(want.size, got.size))
        beyond = None if tolerance is None else count
        return TensorComparison(
            name, dtype, shape, int(want.size), count, float("inf"), -1, 0, beyond
        )
    differ = mismatch_mask(want, got)
    bad = np.flatnonzero(differ)
    max_abs, max_ulp = 0.0, 0
    beyond = None if tolerance is None else 0
    if bad.size:
        e, a = want.reshape(-1)[bad], got.reshape(-1)[bad]
        if _is_float(want.dtype):
            with np.errstate(invalid="ignore", over="ignore"):
                wide_e, wide_a = e.astype(np.float64), a.astype(np.float64)
                diff = np.abs(wide_e - wide_a)
            diff = np.where(np.isnan(diff), np.inf, diff)
            max_abs = float(np.max(diff))
            max_ulp = int(np.max(np.abs(_ulp_line(e) - _ulp_line(a))))
        else:
            wide_e = e.astype(np.float64)
            diff = np.abs(wide_e - a.astype(np.float64))
            max_abs = float(diff.max())
            max_ulp = int(max_abs)  # integers: one unit of the last place is 1
        if tolerance is not None:
            atol, rtol = tolerance
            with np.errstate(invalid="ignore", over="ignore"):
                allowed = atol + rtol * np.abs(e.astype(np.float64))
            beyond = int(np.sum(~(diff <= allowed)))  # NaN vs a number is beyond any tolerance
    first = int(bad[0]) if bad.size else None
    return TensorComparison(
        name,
        type_name(want.dtype),
        shape,
        int(want.size),
        int(bad.size),
        max_abs,
        max_ulp,
        first,
        beyond,
    )


def _is_float(dtype: np.dtype) -> bool:
    # ml_dtypes' float8/bfloat16 types are kind "V" to numpy; their finfo works.
    if dtype.kind == "f":
        return True
    try:
        import ml_dtypes

        ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]
    except (TypeError, ValueError):
        return False
    return True


def _bits(array: np.ndarray) -> np.ndarray:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize]
    return np.ascontiguousarray(array).view(width)


def _ulp_line(values: np.ndarray) -> np.ndarray:
    """Floats of any width on a monotonic integer line: the distance counts floats between."""
    bits = _bits(values).astype(np.int64)
    sign = np.int64(1) << (8 * values.dtype.itemsize - 1)
    line: np.ndarray = np.where(bits & sign, -(bits & (sign - 1)), bits)
    return line
