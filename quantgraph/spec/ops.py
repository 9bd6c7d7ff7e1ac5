"""The four seed operators as data: attributes, arguments, data-type tables.

Wording follows the newest oneDNN Graph definition (v3.13 ``doc/graph_api/operations``):
quantize is ``round(src / scales) + zps`` and dequantize is ``(src - zps) * scales``. Where the
seeds disagree (a division in one DynamicDequantize page, a ``round()`` in the static Dequantize
per-tensor line) they are documentation errors of the older pages; docs/spec.md records why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import dtypes
from .dtypes import DType

DOMAIN = "com.quantgraph"
OPSET_VERSION = 1

PER_TENSOR = "per_tensor"
PER_CHANNEL = "per_channel"
PER_GROUP = "per_group"  # oneDNN v3.7+, DynamicDequantize only
QTYPES = (PER_TENSOR, PER_CHANNEL, PER_GROUP)


@dataclass(frozen=True)
class Attribute:
    """An operator attribute. ``kind`` is the ONNX attribute kind: int, string, floats or ints."""

    name: str
    kind: str
    required: bool
    default: object
    doc: str
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Argument:
    """An input or output in index order; ``types`` are the dtypes any table row allows."""

    name: str
    optional: bool
    doc: str


@dataclass(frozen=True)
class TypeRow:
    """One row of an operator's supported-data-types table."""

    src: DType
    dst: DType
    scales: DType | None = None
    zps: tuple[DType, ...] = ()


@dataclass(frozen=True)
class OpSpec:
    name: str
    summary: str
    formula: str
    is_quantize: bool
    is_static: bool
    attributes: tuple[Attribute, ...]
    inputs: tuple[Argument, ...]
    outputs: tuple[Argument, ...]
    type_rows: tuple[TypeRow, ...]
    notes: tuple[str, ...] = field(default=())

    def attribute(self, name: str) -> Attribute:
        for attr in self.attributes:
            if attr.name == name:
                return attr
        raise KeyError(f"{self.name} has no attribute {name!r}")

    @property
    def src_types(self) -> tuple[DType, ...]:
        return _unique(row.src for row in self.type_rows)

    @property
    def dst_types(self) -> tuple[DType, ...]:
        return _unique(row.dst for row in self.type_rows)

    @property
    def zps_types(self) -> tuple[DType, ...]:
        return _unique(z for row in self.type_rows for z in row.zps)

    def rows_for_src(self, src: DType) -> tuple[TypeRow, ...]:
        return tuple(row for row in self.type_rows if row.src == src)

    @property
    def defaults(self) -> dict[str, object]:
        """Attribute values a node that leaves them out gets (required ones have none)."""
        return {a.name: a.default for a in self.attributes if a.default is not None}

    def with_defaults(self, given: Mapping[str, object]) -> dict[str, object]:
        """``given`` attributes completed with the defaults of those left out."""
        return {**self.defaults, **{k: v for k, v in given.items() if v is not None}}

    @property
    def qtypes(self) -> tuple[str, ...]:
        """The qtype values this op takes."""
        return self.attribute("qtype").allowed

    def has_attribute(self, name: str) -> bool:
        return any(a.name == name for a in self.attributes)

    @property
    def scales_types(self) -> tuple[DType, ...]:
        return _unique(row.scales for row in self.type_rows if row.scales is not None)

    @property
    def dynamic_form(self) -> OpSpec:
        """The dynamic op a static op is defined as (itself if dynamic)."""
        return OPS[f"Dynamic{self.name}"] if self.is_static else self

    @property
    def static_form(self) -> OpSpec:
        """The op with scales and zps as attributes (itself if static)."""
        return self if self.is_static else OPS[self.name.removeprefix("Dynamic")]


def _unique(items: object) -> tuple[DType, ...]:
    seen: list[DType] = []
    for item in items:  # type: ignore[attr-defined]
        if item not in seen:
            seen.append(item)
    return tuple(seen)


def _qtype(allowed: tuple[str, ...]) -> Attribute:
    return Attribute(
        "qtype", "string", False, PER_TENSOR, "Which quantization type is used.", allowed=allowed
    )


QTYPE = _qtype((PER_TENSOR, PER_CHANNEL))
QTYPE_GROUPS = _qtype(QTYPES)
AXIS = Attribute(
    "axis",
    "int",
    False,
    1,
    "Dimension of src the per_channel scales apply along, in [-r, r-1] where r = rank(src); "
    "negative counts from the end. Ignored for per_tensor.",
)
SCALES = Attribute(
    "scales",
    "floats",
    True,
    None,
    "f32 scales; one element when qtype is per_tensor, src.shape[axis] elements when per_channel.",
)
ZPS = Attribute(
    "zps",
    "ints",
    False,
    None,
    "s64 zero points, as many as scales; omitted means zeros. Not allowed with f8 types.",
)
GROUP_SHAPE = Attribute(
    "group_shape",
    "ints",
    False,
    None,
    "per_group only (required there): the group's extent along each src dim, one entry per "
    "dim; src.dims[d] == scales.dims[d] * group_shape[d] for every d.",
)
# Extension: oneDNN takes the quantized type from the dst logical tensor, which an onnxruntime
# kernel cannot see when it is built; ONNX QuantizeLinear-21 solves the same with output_dtype.
OUTPUT_DTYPE = Attribute(
    "output_dtype",
    "int",
    False,
    0,
    "quantgraph extension: ONNX TensorProto element type of dst (as in ONNX QuantizeLinear-21). "
    "0 means: the zps type when zps is s8/u8, else u8.",
)

SRC = Argument("src", False, "Tensor to convert.")
DST = Argument("dst", False, "Converted tensor, same shape as src.")
SCALES_IN = Argument(
    "scales",
    False,
    "1-D tensor of scales (one element for per_tensor); per_group: src's rank, one per group.",
)
ZPS_IN = Argument("zps", True, "Zero points, the shape of scales; absent means zeros.")

QUANTIZED_8BIT = (dtypes.S8, dtypes.U8)
ZP_TYPES = (dtypes.S8, dtypes.U8, dtypes.S32)
DEQUANTIZED = (dtypes.F32, dtypes.F16, dtypes.BF16)  # dst, and the scales' type with it
# zps of the 4-bit rows: the table's s4/u4/s32, and u8 with u4 src, which oneDNN's op schema
# (op_def.hpp) and its gated_mlp_int4 example take though the doc table does not list it.
ZP_TYPES_4BIT = {dtypes.S4: (dtypes.S4, dtypes.S32), dtypes.U4: (dtypes.U4, dtypes.U8, dtypes.S32)}

DYNAMIC_QUANTIZE = OpSpec(
    name="DynamicQuantize",
    summary="Converts an f32 tensor to s8/u8 with scales and zero points given as input tensors.",
    formula="dst = saturate(round_half_even(src / scales) + zps)",
    is_quantize=True,
    is_static=False,
    attributes=(QTYPE, AXIS, OUTPUT_DTYPE),
    inputs=(SRC, SCALES_IN, ZPS_IN),
    outputs=(DST,),
    type_rows=tuple(TypeRow(dtypes.F32, dst, dtypes.F32, ZP_TYPES) for dst in QUANTIZED_8BIT),
)

DYNAMIC_DEQUANTIZE = OpSpec(
    name="DynamicDequantize",
    summary="Converts an s8/u8/s4/u4 tensor to f32/f16/bf16 (the scales' type) with scales and "
    "zero points given as input tensors, per tensor, channel or group.",
    formula="dst = (src - zps) * scales",
    is_quantize=False,
    is_static=False,
    attributes=(QTYPE_GROUPS, AXIS, GROUP_SHAPE),
    inputs=(SRC, SCALES_IN, ZPS_IN),
    outputs=(DST,),
    type_rows=(
        *(TypeRow(src, dst, dst, ZP_TYPES) for src in QUANTIZED_8BIT for dst in DEQUANTIZED),
        *(TypeRow(src, dst, dst, zps) for src, zps in ZP_TYPES_4BIT.items() for dst in DEQUANTIZED),
    ),
    notes=(
        'dst has the scales\' type ("the data types of scales and dst should be the same"); '
        "f16/bf16 results are computed in f32 and rounded to nearest even once, which is what "
        "onnxruntime's DequantizeLinear gives for float16 (onnxruntime has no bfloat16 kernel).",
    ),
)

QUANTIZE = OpSpec(
    name="Quantize",
    summary="Converts an f32 tensor to s8/u8/f8 with scales and zero points given as attributes.",
    formula="dst = saturate(round_half_even(src / scales) + zps)",
    is_quantize=True,
    is_static=True,
    attributes=(QTYPE, AXIS, SCALES, ZPS, OUTPUT_DTYPE),
    inputs=(SRC,),
    outputs=(DST,),
    type_rows=tuple(
        TypeRow(dtypes.F32, dst) for dst in (dtypes.S8, dtypes.U8, dtypes.F8_E4M3, dtypes.F8_E5M2)
    ),
)

DEQUANTIZE = OpSpec(
    name="Dequantize",
    summary="Converts an s8/u8/f8 tensor to f32 with scales and zero points given as attributes.",
    formula="dst = (src - zps) * scales",
    is_quantize=False,
    is_static=True,
    attributes=(QTYPE, AXIS, SCALES, ZPS),
    inputs=(SRC,),
    outputs=(DST,),
    type_rows=tuple(
        TypeRow(src, dtypes.F32) for src in (dtypes.S8, dtypes.U8, dtypes.F8_E4M3, dtypes.F8_E5M2)
    ),
)

# In this order everywhere, the generated C++ OpKind enum included.
OPS: dict[str, OpSpec] = {
    op.name: op for op in (DYNAMIC_QUANTIZE, DYNAMIC_DEQUANTIZE, QUANTIZE, DEQUANTIZE)
}


def get(name: str) -> OpSpec:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a quantgraph operator; known: {', '.join(OPS)}") from None
