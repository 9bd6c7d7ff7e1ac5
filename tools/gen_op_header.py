"""Writes the C++ view of the spec (custom_ops/src/common/generated/op_spec.h) from this package.

Run ``python -m tools.gen_op_header --write`` after changing the spec; a test fails while the
committed header differs from what this prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from onnx import TensorProto

from quantgraph.spec import dtypes
from quantgraph.spec.dtypes import DType
from quantgraph.spec.ops import (
    DEQUANTIZED,
    DOMAIN,
    OPS,
    OPSET_VERSION,
    PER_CHANNEL,
    PER_GROUP,
    PER_TENSOR,
    QTYPES,
)
from quantgraph.spec.rules import DEFAULT_QUANTIZED, DST_FROM_ZPS, RULES, dst_type

from .generated import write_or_print

HEADER_PATH = Path("custom_ops/src/common/generated/op_spec.h")


def _cxx_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid C++ literal for ASCII text


def type_constant(dtype: DType) -> str:
    """The C++ constant of a spec type: s8 -> kS8, f8_e4m3 -> kF8E4M3."""
    return "k" + dtype.name.replace("_", "").upper()


def _type_of(onnx: int) -> str:
    found = dtypes.from_onnx(onnx)
    if found is None:
        raise ValueError(f"the dst rule names ONNX type {onnx}, which is not a spec type")
    return type_constant(found)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _attribute_kinds() -> dict[str, str]:
    """Each attribute name of the ops and its kind (one kind per name across the ops)."""
    kinds: dict[str, str] = {}
    for op in OPS.values():
        for attribute in op.attributes:
            known = kinds.setdefault(attribute.name, attribute.kind)
            if known != attribute.kind:
                raise ValueError(
                    f"attribute {attribute.name!r} has kinds {known} and {attribute.kind}"
                )
    return kinds


def _string_list(items: Iterable[str]) -> str:
    return "{" + ", ".join(_cxx_string(item) for item in items) + "}"


def _dst_from_scales() -> tuple[DType, ...]:
    """The scales types that are the dst of a dynamic dequantize op (quantgraph.spec.dst_type),
    checked against the rule for every op and type: a static dequantize op, and a dynamic one
    whose scales are of another type, write kDequantizedDst."""
    default = {dst_type(op) for op in OPS.values() if not op.is_quantize}
    if len(default) != 1:
        raise ValueError(f"dequantize ops disagree on their dst type: {sorted(default)}")
    fallback = default.pop()
    chosen = tuple(DEQUANTIZED)
    for op in OPS.values():
        if op.is_quantize:
            continue
        for d in dtypes.ALL:
            from_scales = not op.is_static and d in chosen
            expected = d.onnx if from_scales else fallback
            if dst_type(op, scales=d.onnx) != expected:
                raise ValueError(f"the dst rule of {op.name} with {d.name} scales changed")
    if dtypes.from_onnx(fallback) not in chosen:
        raise ValueError("the default dequantized dst is not one of the scales-chosen ones")
    return chosen


def _ops_and_types() -> list[str]:
    """OpKind, the kOps table, the type constants and the dst rule's data."""
    max_attributes = max(len(op.attributes) for op in OPS.values())
    lines = [
        "// Operator kinds in the spec's order (quantgraph.spec.OPS); kOps is indexed by them.",
        "enum class OpKind : int {",
    ]
    lines += [f"  k{name} = {index}," for index, name in enumerate(OPS)]
    lines += [
        "};",
        f"inline constexpr int kOpCount = {len(OPS)};",
        "",
        "// input_count: the op's inputs (optional ones included); qtypes: the values its qtype",
        "// attribute takes (OpSpec.qtypes); attributes: the names of its attributes.",
        f"inline constexpr int kMaxQtypes = {len(QTYPES)};",
        f"inline constexpr int kMaxAttributes = {max_attributes};",
        "struct OpInfo {",
        "  const char* name;",
        "  bool is_quantize;",
        "  bool is_static;",
        "  int input_count;",
        "  int qtype_count;",
        "  const char* qtypes[kMaxQtypes];",
        "  int attribute_count;",
        "  const char* attributes[kMaxAttributes];",
        "};",
        "inline constexpr OpInfo kOps[kOpCount] = {",
    ]
    for op in OPS.values():
        lines.append(
            f"    {{{_cxx_string(op.name)}, {_bool(op.is_quantize)}, {_bool(op.is_static)}, "
            f"{len(op.inputs)}, {len(op.qtypes)}, {_string_list(op.qtypes)}, "
            f"{len(op.attributes)}, {_string_list(a.name for a in op.attributes)}}},"
        )
    lines += [
        "};",
        "",
        "// Attribute kinds (ONNX attribute types as the spec names them), by attribute name.",
        "struct AttributeInfo {",
        "  const char* name;",
        "  const char* kind;",
        "};",
        "inline constexpr AttributeInfo kAttributes[] = {",
    ]
    for name, kind in _attribute_kinds().items():
        lines.append(f"    {{{_cxx_string(name)}, {_cxx_string(kind)}}},")
    lines += [
        "};",
        "",
        "// The spec's data types as ONNX TensorProto element types (quantgraph.spec.dtypes).",
    ]
    lines += [f"inline constexpr int {type_constant(d)} = {d.onnx};" for d in dtypes.ALL]
    dequantized = {dst_type(op) for op in OPS.values() if not op.is_quantize}
    if len(dequantized) != 1:
        raise ValueError(f"dequantize ops disagree on their dst type: {sorted(dequantized)}")
    zps_names = ", ".join(type_constant(d) for d in DST_FROM_ZPS)
    scales_names = ", ".join(type_constant(d) for d in _dst_from_scales())
    lines += [
        "",
        "// The dst rule (quantgraph.spec.dst_type): dynamic dequantize ops write the scales type",
        "// when it is one of kDstFromScales, else (and static ones always) kDequantizedDst;",
        "// quantize ops output_dtype when it is set, else (dynamic ops) the zps type when it is",
        "// one of kDstFromZps, else kDefaultQuantizedDst.",
        f"inline constexpr int kDequantizedDst = {_type_of(dequantized.pop())};",
        f"inline constexpr int kDstFromScales[] = {{{scales_names}}};",
        f"inline constexpr int kDstFromZps[] = {{{zps_names}}};",
        f"inline constexpr int kDefaultQuantizedDst = {type_constant(DEFAULT_QUANTIZED)};",
    ]
    return lines


def render() -> str:
    lines = [
        "// Generated by `python -m tools.gen_op_header --write` from quantgraph/spec.",
        "// Do not edit.",
        "// tests/test_codegen.py fails while this file differs from the generator's output.",
        "#pragma once",
        "#include <cstdint>",
        "",
        "namespace qg::spec {",
        "",
        f"inline constexpr const char* kDomain = {_cxx_string(DOMAIN)};",
        f"inline constexpr int kOpsetVersion = {OPSET_VERSION};",
        f"inline constexpr const char* kPerTensor = {_cxx_string(PER_TENSOR)};",
        f"inline constexpr const char* kPerChannel = {_cxx_string(PER_CHANNEL)};",
        f"inline constexpr const char* kPerGroup = {_cxx_string(PER_GROUP)};",
        "",
        "// Attribute defaults (the same for every op that has the attribute).",
    ]
    first = next(iter(OPS.values()))
    lines += [
        "inline constexpr const char* kDefaultQtype = "
        f"{_cxx_string(str(first.attribute('qtype').default))};",
        f"inline constexpr int64_t kDefaultAxis = {first.attribute('axis').default};",
        "inline constexpr int64_t kDefaultOutputDtype = "
        f"{OPS['DynamicQuantize'].attribute('output_dtype').default};",
        "",
        "// Operator names.",
    ]
    for name in OPS:
        lines.append(f"inline constexpr const char* k{name} = {_cxx_string(name)};")
    lines += ["", *_ops_and_types()]
    max_zps = max(len(row.zps) for op in OPS.values() for row in op.type_rows)
    lines += [
        "",
        "// Rule wording: {field} placeholders are filled by qg::FormatRule.",
        "struct RuleText {",
        "  const char* id;",
        "  const char* text;",
        "};",
        "inline constexpr RuleText kRules[] = {",
    ]
    for rule_id, text in RULES.items():
        lines.append(f"    {{{_cxx_string(rule_id)}, {_cxx_string(text)}}},")
    lines += [
        "};",
        "",
        "// Supported-data-types tables; values are ONNX TensorProto element types, which equal",
        "// ONNXTensorElementDataType. scales == 0: static op (scales is an attribute).",
        "struct TypeRow {",
        "  const char* op;",
        "  int src;",
        "  int dst;",
        "  int scales;",
        f"  int zps[{max_zps}];",
        "  int zps_count;",
        "};",
        "inline constexpr TypeRow kTypeRows[] = {",
    ]
    for op in OPS.values():
        for row in op.type_rows:
            zps = [z.onnx for z in row.zps] + [0] * (max_zps - len(row.zps))
            scales = row.scales.onnx if row.scales else 0
            lines.append(
                f"    {{{_cxx_string(op.name)}, {row.src.onnx}, {row.dst.onnx}, {scales}, "
                f"{{{', '.join(map(str, zps))}}}, {len(row.zps)}}},  "
                f"// {row.src.name} -> {row.dst.name}"
            )
    lines += [
        "};",
        "",
        "// The spec's data types (names as in messages); bits: storage bits of one element",
        "// (4-bit types are packed two to a byte, the first element in the low nibble); qmin/qmax",
        "// only for integer types, float8_max only for float8 types.",
        "struct DType {",
        "  int onnx;",
        "  const char* name;",
        "  int bits;",
        "  bool is_integer;",
        "  bool is_float8;",
        "  int64_t qmin;",
        "  int64_t qmax;",
        "  float float8_max;",
        "};",
        "inline constexpr DType kDTypes[] = {",
    ]
    for d in dtypes.ALL:
        qmin, qmax = d.int_range if d.is_integer else (0, 0)
        f8max = f"{d.float8_max:.1f}f" if d.is_float8 else "0.0f"
        lines.append(
            f"    {{{d.onnx}, {_cxx_string(d.name)}, {d.bits}, {_bool(d.is_integer)}, "
            f"{_bool(d.is_float8)}, {qmin}LL, {qmax}LL, {f8max}}},"
        )
    lines += [
        "};",
        "",
        "// Names of every ONNX element type, for messages about types outside the spec",
        "// (quantgraph.spec.dtypes.onnx_name), and the name of any other value ({onnx}: the",
        "// value).",
        "struct OnnxTypeName {",
        "  int onnx;",
        "  const char* name;",
        "};",
        "inline constexpr OnnxTypeName kOnnxTypeNames[] = {",
    ]
    for _, value in sorted(TensorProto.DataType.items(), key=lambda item: item[1]):
        lines.append(f"    {{{value}, {_cxx_string(dtypes.onnx_name(value))}}},")
    sentinel = -987654321  # no ONNX type: onnx_name's fallback wording, with the value marked
    unknown = dtypes.onnx_name(sentinel).replace(str(sentinel), "{onnx}")
    lines += [
        "};",
        f"inline constexpr const char* kUnknownTypeName = {_cxx_string(unknown)};",
        "",
        "}  // namespace qg::spec",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return write_or_print(render, HEADER_PATH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
