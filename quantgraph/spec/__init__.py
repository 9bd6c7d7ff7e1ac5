"""Single source of truth for the seed operators: names, attributes, dtype tables, rules.

Imports nothing else of quantgraph; everything else asks it.
"""

from . import dtypes
from .dtypes import DType
from .ops import (
    DEQUANTIZE,
    DOMAIN,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    OPS,
    OPSET_VERSION,
    PER_CHANNEL,
    PER_TENSOR,
    QTYPES,
    QUANTIZE,
    Argument,
    Attribute,
    OpSpec,
    TypeRow,
    get,
)
from .rules import (
    RULES,
    CallTypes,
    SpecError,
    check_call,
    check_qtype,
    check_scale_values,
    check_shapes,
    check_static_attributes,
    check_types,
    default_output_dtype,
    resolve_axis,
)

__all__ = [
    "DEQUANTIZE",
    "DOMAIN",
    "DYNAMIC_DEQUANTIZE",
    "DYNAMIC_QUANTIZE",
    "OPS",
    "OPSET_VERSION",
    "PER_CHANNEL",
    "PER_TENSOR",
    "QTYPES",
    "QUANTIZE",
    "RULES",
    "Argument",
    "Attribute",
    "CallTypes",
    "DType",
    "OpSpec",
    "SpecError",
    "TypeRow",
    "check_call",
    "check_qtype",
    "check_scale_values",
    "check_shapes",
    "check_static_attributes",
    "check_types",
    "default_output_dtype",
    "dtypes",
    "get",
    "resolve_axis",
]
