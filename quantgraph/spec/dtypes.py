"""Data types the seed operators use, named as oneDNN names them and mapped to ONNX and numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto


@dataclass(frozen=True)
class DType:
    """One tensor element type: its oneDNN name, ONNX enum and numpy dtype.

    ``bits``: storage bits of one element; 4-bit types are packed two to a byte in ONNX and
    oneDNN tensors (first element in the low nibble) and unpacked one to a numpy element.
    """

    name: str
    onnx: int
    numpy_name: str
    bits: int
    is_float8: bool = False
    from_ml_dtypes: bool = False  # float8, bfloat16 and 4-bit numpy types live in ml_dtypes

    @property
    def numpy(self) -> np.dtype:
        if self.from_ml_dtypes:
            import ml_dtypes  # onnx depends on it

            found: np.dtype = np.dtype(getattr(ml_dtypes, self.numpy_name))
            return found
        return np.dtype(self.numpy_name)

    @property
    def is_integer(self) -> bool:
        return self.numpy.kind in "iu" or self.numpy_name in ("int4", "uint4")

    @property
    def is_float(self) -> bool:
        return not self.is_integer

    @property
    def int_range(self) -> tuple[int, int]:
        """Lowest and highest value of an integer type."""
        if self.from_ml_dtypes:
            import ml_dtypes

            small = ml_dtypes.iinfo(self.numpy)  # type: ignore[no-untyped-call]
            return int(small.min), int(small.max)
        info = np.iinfo(self.numpy_name)
        return int(info.min), int(info.max)

    @property
    def float8_max(self) -> float:
        """Largest finite value of a float8 type (the saturation bound)."""
        return float(FLOAT8_MAX[self.name])

    def __str__(self) -> str:
        return self.name


S8 = DType("s8", TensorProto.INT8, "int8", 8)
U8 = DType("u8", TensorProto.UINT8, "uint8", 8)
S32 = DType("s32", TensorProto.INT32, "int32", 32)
F32 = DType("f32", TensorProto.FLOAT, "float32", 32)
F8_E4M3 = DType(
    "f8_e4m3", TensorProto.FLOAT8E4M3FN, "float8_e4m3fn", 8, is_float8=True, from_ml_dtypes=True
)
F8_E5M2 = DType(
    "f8_e5m2", TensorProto.FLOAT8E5M2, "float8_e5m2", 8, is_float8=True, from_ml_dtypes=True
)
# oneDNN v3.7+ DynamicDequantize rows (int4 weights with f16/bf16 scales).
S4 = DType("s4", TensorProto.INT4, "int4", 4, from_ml_dtypes=True)
U4 = DType("u4", TensorProto.UINT4, "uint4", 4, from_ml_dtypes=True)
F16 = DType("f16", TensorProto.FLOAT16, "float16", 16)
BF16 = DType("bf16", TensorProto.BFLOAT16, "bfloat16", 16, from_ml_dtypes=True)

ALL: tuple[DType, ...] = (S8, U8, S32, F32, F8_E4M3, F8_E5M2, S4, U4, F16, BF16)
FLOAT8_MAX = {"f8_e4m3": 448.0, "f8_e5m2": 57344.0}

BY_NAME = {d.name: d for d in ALL}
BY_ONNX = {d.onnx: d for d in ALL}


def from_onnx(elem_type: int) -> DType | None:
    """The spec dtype for an ONNX element type, or None when the spec has no such type."""
    return BY_ONNX.get(elem_type)


def from_numpy(dtype: np.dtype) -> DType | None:
    for d in ALL:
        if d.numpy == dtype:
            return d
    return None


def onnx_of_numpy(dtype: np.dtype) -> int:
    """The ONNX element type of any numpy dtype (0, UNDEFINED, when ONNX has none)."""
    found = from_numpy(dtype)
    if found is not None:
        return found.onnx
    from onnx import helper

    try:
        return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    except (KeyError, TypeError, ValueError):
        return 0


def onnx_name(elem_type: int) -> str:
    """A readable name for any ONNX element type (for messages about types outside the spec)."""
    spec = BY_ONNX.get(elem_type)
    if spec is not None:
        return spec.name
    try:
        name = str(TensorProto.DataType.Name(elem_type)).lower()
    except ValueError:
        return f"unknown ({elem_type})"
    return "unknown (0)" if name == "undefined" else name
