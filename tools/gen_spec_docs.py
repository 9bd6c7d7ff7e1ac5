"""Writes docs/spec.md from this package: the four operators' tables, the rules, the decisions.

``python -m tools.gen_spec_docs --write`` writes it (without ``--write``: prints it).
Attribute, argument and data-type tables come from :mod:`quantgraph.spec.ops`, the rule
wording from :mod:`quantgraph.spec.rules`: nothing there is retyped. The "Decisions" section
is hand-written text kept here (:data:`DECISIONS`); the numbers it cites are measured by
:func:`measure_rounding` each time the page is rendered, with fixed seeds, so the page and
the measurement cannot drift.
A test (tests/test_seed_tables.py::test_spec_page_is_generated) fails while the committed page
differs from what this prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantgraph.spec import dtypes
from quantgraph.spec.ops import DOMAIN, OPS, OPSET_VERSION, Attribute, OpSpec
from quantgraph.spec.rules import RULES

from .generated import write_or_print

DOC_PATH = Path("docs/spec.md")

_KIND = {"int": "s64", "string": "string", "floats": "f32 list", "ints": "s64 list"}


# -- measurements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundingMeasurement:
    """How often the rounding variants the seeds leave open give different results (float32).

    ``uniform``: scale log-uniform in [1e-3, 1], x = scale * u with u ~ U(-160, 160) (so that
    x / scale mostly lands inside the u8 range after adding zp), zp ~ U{0..255}, all float32.
    ``ties``: x / scale exactly k + 0.5 (k ~ U{-300..299}), zp ~ U{0..255}.
    ``realistic``: ONNX DynamicQuantizeLinear's own u8 scale and zero point on tensors of
    N(0, sigma) activations (sigma ~ U(0.1, 10)).
    """

    uniform_samples: int
    uniform_differ: int  # round(x/s + zp) != round(x/s) + zp, before saturation
    uniform_differ_u8: int  # the same after saturation to u8
    ties_samples: int
    ties_differ: int
    ties_odd_zp: int
    realistic_samples: int
    realistic_differ_u8: int
    reciprocal_differ: int  # round(x * (1/s)) + zp != round(x / s) + zp on the uniform set
    reciprocal_differ_u8: int


def measure_rounding(samples: int = 1_000_000) -> RoundingMeasurement:
    """Measure, in float32 arithmetic as the kernels do it, with fixed seeds."""
    f32 = np.float32
    rng = np.random.default_rng(20240601)
    scale = np.exp(rng.uniform(np.log(1e-3), 0.0, samples)).astype(f32)
    x = (scale * rng.uniform(-160.0, 160.0, samples).astype(f32)).astype(f32)
    zp = rng.integers(0, 256, samples)
    with np.errstate(all="ignore"):
        quotient = (x / scale).astype(f32)
        adding_first = np.rint((quotient + zp.astype(f32)).astype(f32)).astype(np.int64)
        rounding_first = np.rint(quotient).astype(np.int64) + zp
        reciprocal = (x * (f32(1.0) / scale).astype(f32)).astype(f32)
        by_reciprocal = np.rint(reciprocal).astype(np.int64) + zp

    def u8(values: np.ndarray) -> np.ndarray:
        return np.asarray(np.clip(values, 0, 255))

    ties_rng = np.random.default_rng(20240602)
    tie = (ties_rng.integers(-300, 300, samples) + 0.5).astype(f32)
    tie_zp = ties_rng.integers(0, 256, samples)
    tie_adding_first = np.rint((tie + tie_zp.astype(f32)).astype(f32)).astype(np.int64)
    tie_rounding_first = np.rint(tie).astype(np.int64) + tie_zp

    real_rng = np.random.default_rng(20240603)
    realistic_samples = realistic_differ = 0
    for _ in range(100):
        activations = (real_rng.standard_normal(10_000) * real_rng.uniform(0.1, 10.0)).astype(f32)
        low = min(f32(0.0), activations.min())
        high = max(f32(0.0), activations.max())
        s = f32((high - low) / f32(255.0))
        z = int(np.clip(np.rint(-low / s), 0, 255))
        q = (activations / s).astype(f32)
        first = u8(np.rint((q + f32(z)).astype(f32)).astype(np.int64))
        second = u8(np.rint(q).astype(np.int64) + z)
        realistic_samples += activations.size
        realistic_differ += int(np.count_nonzero(first != second))

    return RoundingMeasurement(
        uniform_samples=samples,
        uniform_differ=int(np.count_nonzero(adding_first != rounding_first)),
        uniform_differ_u8=int(np.count_nonzero(u8(adding_first) != u8(rounding_first))),
        ties_samples=samples,
        ties_differ=int(np.count_nonzero(tie_adding_first != tie_rounding_first)),
        ties_odd_zp=int(np.count_nonzero(tie_zp % 2)),
        realistic_samples=realistic_samples,
        realistic_differ_u8=realistic_differ,
        reciprocal_differ=int(np.count_nonzero(by_reciprocal != rounding_first)),
        reciprocal_differ_u8=int(np.count_nonzero(u8(by_reciprocal) != u8(rounding_first))),
    )


# -- the decisions (hand-written) --------------------------------------------------------------

# Placeholders in braces are filled from measure_rounding().
DECISIONS = """\
The seed pages (oneDNN Graph documentation of several ages, in /work/shared/seeds) disagree in
places and leave some behaviour "implementation defined". quantgraph follows the newest oneDNN
Graph definition (v3.13) and, where that leaves a choice, ONNX and onnxruntime, so that a
rewritten model is bit-exact with its QuantizeLinear/DequantizeLinear original. Each decision
below names the seeds involved and the test that holds it.

### 1. Dequantize multiplies: `dst = (src - zps) * scales`

Seed 003 (DynamicDequantize-1) writes `output = (input - zp) / scale` and, per channel, divides
by `scale` rather than `scale_i`. Seeds 000 and 004 (the same op, newer) and the newest oneDNN
write `(src - zps) * scales`, as does ONNX DequantizeLinear. A scale is the size of one
quantization step, so only the product gives back the float value; seed 003's division and its
missing `_i` are documentation errors. Both dequantize ops multiply, per channel by `scales_i`
(tests/test_seed_tables.py checks every row against onnxruntime's DequantizeLinear, or a
written-out formula where ONNX lacks the type combination).

### 2. No rounding in Dequantize

Seed 001 (static Dequantize) writes `dst_i = round((src_i - zps) * scale)` for per_tensor and
no `round` for per_channel, on the same page, for an f32 result. Rounding an f32 result to an
integer would destroy the scale's fraction (scale 0.1 would give 0 or 1 for every step). The
newest oneDNN page has no `round`; ONNX neither. The per_tensor line is a documentation error:
quantgraph does not round dequantized values. The f32 result is
`float32(int64(src) - int64(zp)) * scale` (exact difference, one rounding to f32, one f32
product), onnxruntime's arithmetic.

### 3. Quantize rounds first, then adds the zero point: `round(src / scale) + zp`

Seed 002 (DynamicQuantize-1) and the newest oneDNN write `round(x / scale + zp)`. In real
numbers that equals `round(x / scale) + zp` (zp is an integer), but in float32 it does not:
`x / scale + zp` is rounded to float32 before `round` sees it, which moves values across a .5
boundary, and on an exact tie the parity that round-half-to-even looks at becomes that of
`k + zp` instead of `k`. ONNX QuantizeLinear and onnxruntime compute `round(x / scale)` and add
zp as an integer; quantgraph does the same.

How often the two differ, measured by `tools.gen_spec_docs.measure_rounding()` in float32 with
fixed seeds (regenerated with this page):

- {uniform_samples:,} random calls (scale log-uniform in [0.001, 1], x = scale * u with u
  uniform in [-160, 160], zp uniform in 0..255): {uniform_differ} differ before saturation
  ({uniform_rate}), {uniform_differ_u8} after saturation to u8 ({uniform_rate_u8}).
- {ties_samples:,} exact ties (`x / scale = k + 0.5`, k uniform in -300..299, zp uniform in
  0..255): {ties_differ:,} differ ({ties_rate}); {ties_odd_zp:,} of these calls have an odd zp.
- {realistic_samples:,} activations quantized to u8 with ONNX DynamicQuantizeLinear's own scale
  and zero point (100 tensors of 10,000 N(0, sigma) values, sigma uniform in [0.1, 10]):
  {realistic_differ_u8} differ ({realistic_rate}).

Rare on random data, systematic on ties (inputs with few significant bits, e.g. images or
power-of-two scales, hit ties often). For the same reason quantgraph divides by the scale in
float32 and does not multiply by a precomputed reciprocal, as oneDNN's optimized kernels do:
on the same {uniform_samples:,} random calls `round(x * (1 / scale)) + zp` differs from
`round(x / scale) + zp` in {reciprocal_differ} ({reciprocal_rate}) before saturation,
{reciprocal_differ_u8} after.

### 4. Ties round half to even

Every seed says "Rounding mode is library-implementation defined". quantgraph rounds half to
even, as ONNX QuantizeLinear specifies and onnxruntime does (`np.rint`, C's `nearbyint` in the
default rounding mode). The same rule applies to float8: round to nearest, ties to even.

### 5. NaN

Integer quantization has no NaN. quantgraph maps NaN to the lowest value of the quantized type
(-128 for s8, 0 for u8) whatever the zero point, as onnxruntime does (its kernels clamp NaN to
the lower bound before rounding). Float8 quantization keeps NaN (f8_e4m3 and f8_e5m2 both have
NaN codes). Dequantize of an f8 NaN is NaN.

### 6. Infinities and overflow saturate

`+inf`, `-inf` and finite values beyond the range saturate: to the highest/lowest integer of
s8/u8 after adding the zero point, to `+-448` (f8_e4m3) and `+-57344` (f8_e5m2) for float8 (ONNX
QuantizeLinear with `saturate=1`, the default). The seeds say nothing about overflow; oneDNN
saturates. An ONNX QuantizeLinear with `saturate=0` (float8 overflow to inf/NaN) has no spec
equivalent: the converter leaves it as it is and reports why.

### 7. s32 zero points

DynamicQuantize (seed 002) and DynamicDequantize (seeds 000, 003, 004) accept s8, u8 and s32
zero points whatever the quantized type; ONNX requires the zero point's type to be the quantized
type. With s32 zero points the arithmetic is done in 64-bit integers and then saturated:
quantize is `clamp(round(x / scale) + zp, qmin, qmax)` with the sum taken exactly (so zp =
2**31 - 1 with x = -inf still gives qmin), dequantize computes `src - zp` exactly before the one
conversion to f32. The static ops take zero points as an s64 list attribute (seed 001), bounded
to s32 by rule `zps-value`, and not bounded to the quantized type. The saturation bounds
`qmin - zp`, `qmax - zp` must then be exact: in float32 they are not once |zp| > 2**24 (s8,
zp = 2**31 - 1, x = -inf would give -1); tests/test_seed_tables.py
(`test_s32_zero_points_saturate_exactly`, and every s32 row) holds all runners to it.

### 8. Zero and non-finite scales

Quantize divides by the scale: a zero, infinite or NaN scale has no meaning there, and oneDNN's
kernels reject zero scales. Both quantize ops reject them (rule `scale-value`): static scales
when the model is checked (`onnx.checker` with quantgraph's schemas) and when a native session
is created, dynamic scales at run time; the converter leaves a QuantizeLinear with such a
constant scale as it is. Dequantize multiplies, which is defined for every
float: zero, infinite and NaN scales are allowed and give what IEEE float32 multiplication
gives, as in ONNX.

### 9. The quantized type of DynamicQuantize and the `output_dtype` extension

oneDNN takes DynamicQuantize's and Quantize's quantized type from the data type of the dst
logical tensor (seed 002: "specified via the data type of output logical tensor"). An
onnxruntime kernel cannot see the declared type of its output value: a custom op's output type
is fixed by its registration (onnxruntime-extensions cannot even overload on it). ONNX
QuantizeLinear-21 has the same problem and adds an `output_dtype` attribute; quantgraph's
quantize ops take the same optional attribute (ONNX element type of dst). Without it, dst is
the zero point's type when that is s8 or u8, else the type the model declares for the output
(graph output or value_info: the seed's rule), else u8 (ONNX's default). Neither onnxruntime nor
ONNX's shape inference shows a kernel or a schema the declared type, so
`quantgraph.passes.DeclaredDstPass` writes it as `output_dtype` before a session is made
(`quantgraph.InferenceSession`, every backend and command); oneDNN's own hand-checkable cases
with an s8 dst and no zero points then give the same s8 results on the native, python and
onednn backends (tests/passes/test_declared_dst.py). The converter writes `output_dtype` on
every static Quantize and on every DynamicQuantize without zero points.

### 10. Per-channel axis, scale counts, absent zero points

`axis` is in [-r, r-1] with negative values counting from the end (all seeds). Seeds 002 and 003
say the attribute is "valid only when qtype is per_channel": for per_tensor it is ignored and
not validated. per_channel needs exactly `src.shape[axis]` scales and as many zero points;
per_tensor exactly one. Absent zero points mean zeros (symmetric quantization).

### 11. Scale and zero-point types

Scales are f32 in every seed. The newest oneDNN DynamicDequantize (v3.7+, in force v3.13) also
takes f16/bf16 scales, 4-bit src and `per_group` quantization, none of which the seeds have;
quantgraph follows v3.13 there (see 12-14). Float8 takes no zero points (seed 001); an ONNX
float8 node's zero point is accepted only when it is a constant zero, which the converter drops.

### 12. DynamicDequantize's 4-bit, f16 and bf16 rows

src s8/u8/s4/u4; dst f32/f16/bf16, always the scales' type ("the data types of scales and dst
should be the same"); zps s8/u8/s32 for 8-bit src and s4/u4/s32 for 4-bit src, as v3.13's table
says, plus u8 zps with u4 src, which oneDNN's op schema (`op_def.hpp`) and its
`gated_mlp_int4` example take though the doc table does not list it. 4-bit tensors are packed
two to a byte, first element in the low nibble, in ONNX and oneDNN alike. DynamicQuantize,
Quantize and Dequantize keep their tables (no 4-bit, no f16/bf16, no per_group).

### 13. f16 and bf16 results round once

The spec leaves precision to the implementation. quantgraph computes `(src - zps) * scales` in
f32 (exact for 4- and 8-bit operands and f16 scales) and rounds the product once to f16 or bf16,
to nearest even. onnxruntime's DequantizeLinear with float16 scales gives exactly this (0
differences on int4/uint4/int8/uint8 blocked cases); onnxruntime has no bfloat16
DequantizeLinear on CPU, so bf16 is defined by this rule alone.

### 14. per_group

`qtype=per_group` needs `group_shape` (one entry per src dim); scales and zps have src's rank and
`src.dims[d] == scales.dims[d] * group_shape[d]` for every d: groups tile src exactly. ONNX's
blocked DequantizeLinear (`block_size` along one axis) is per_group with a group_shape of ones
but the block size on that axis. ONNX also allows a short last block (onnxruntime's
MatMulNBitsQuantizer writes K = 56 with blocks of 16: scales of ceil(K/B) rows), which per_group
cannot express directly. For a constant src the converter pads it with zeros to whole blocks
(scales and zero points already have ceil(K/B) rows), dequantizes per_group and slices the result
back to K: `DynamicDequantize(w_padded) -> Slice(0:K)`, exact because dequantization is
elementwise and the padding is sliced away (0 differences on onnxruntime's own int4/uint4, f32/f16
models, tests/test_short_blocks.py). The Slice is marked in its metadata
(`quantgraph.padded_block`) and lowering folds the pair back into the original
DequantizeLinear. A src fed at run time with a short last block, and every blocked
QuantizeLinear, stay as they are, with the reason.

### 15. oneDNN's own arithmetic, opt-in

Decision 3 keeps ONNX's rounding by default. What oneDNN computes is a second, measured
arithmetic (oneDNN v3.2 and v3.13.2, single-op Graph partitions, every ISA cap; modelled in
`quantgraph/reference/onednn_arithmetic.py`): quantize
`saturate(rne(fl(fl(x * fl(1/s)) + fl(zp))))` (no FMA), float8 through f16 without saturation
(e4m3 overflow to NaN, e5m2 to inf), NaN to s8 127 before v3.7; dequantize ONNX's except float8
-0 -> +0 and s32 zero points through float. The
native backend runs it with `arithmetic="onednn"`, bit-exact with the onednn backend (oneDNN
itself) on every row both run (docs/onednn.md); validation against oneDNN's arithmetic says it
is not expected to be exact and judges by `--atol`/`--rtol`.

### 16. DynamicQuantizeLinear: scale and zero point in standard ops, then DynamicQuantize

ONNX's DynamicQuantizeLinear (u8, per tensor) computes its own scale and zero point; the spec's
DynamicQuantize takes them as inputs. The converter writes ONNX's function body with standard
ops (ReduceMin, ReduceMax, Min, Max, Sub, Div, Clip, Round, Cast) feeding a per_tensor
DynamicQuantize, with one change: when the range is empty (every x is 0) the body divides by a
zero scale, while onnxruntime's kernel and ONNX's reference use a scale of 1, so an Equal/Where
pair gives 1 there. Every float32 operation is the one onnxruntime's kernel does, in its order:
`lo = min(min(x), 0)`, `hi = max(max(x), 0)`, `scale = (hi - lo) / 255`, `zp =
round_half_even(clip(0 - lo / scale, 0, 255))`, then `y = saturate(round_half_even(x / scale) +
zp)`. On finite inputs the result is bit for bit onnxruntime's (y, y_scale and y_zero_point;
hypothesis-drawn inputs of every sign and magnitude up to 3e37, all zeros, exact .5 ties; and
quantize_dynamic models with ConvInteger/MatMulInteger on both backends,
tests/test_dynamic_quantize_linear.py). Where float32 cannot carry the scale, the two differ
loudly, not silently: an input holding +-inf, or a range beyond float32 (`hi - lo > 3.4e38`),
gives an infinite scale; a range below about 1.8e-43 (subnormal inputs) makes `(hi - lo) / 255`
underflow to a zero scale; a NaN where onnxruntime's min/max search skips it gives a NaN scale.
onnxruntime quantizes with such a scale anyway (every y 0 or 255, [1e-43, 0] gives y [255, 0]
with zero point 255), quantgraph's DynamicQuantize refuses a zero or non-finite scale (decision
8, rule `scale-value`) and the run fails naming the node. The expansion's nodes are marked in
their metadata (`quantgraph.dynamic_quantize_linear`), and lowering gives the DynamicQuantizeLinear
back (unless the marked nodes were edited since: then they stay and the DynamicQuantize becomes
a QuantizeLinear).
"""


def _rate(count: int, total: int) -> str:
    if total == 0 or count == 0:
        return "0%"
    percent = 100.0 * count / total
    return f"{percent:.4f}%" if percent < 0.01 else f"{percent:.2f}%"


def decisions(measurement: RoundingMeasurement | None = None) -> str:
    m = measurement or measure_rounding()
    return DECISIONS.format(
        uniform_samples=m.uniform_samples,
        uniform_differ=m.uniform_differ,
        uniform_rate=_rate(m.uniform_differ, m.uniform_samples),
        uniform_differ_u8=m.uniform_differ_u8,
        uniform_rate_u8=_rate(m.uniform_differ_u8, m.uniform_samples),
        ties_samples=m.ties_samples,
        ties_differ=m.ties_differ,
        ties_rate=_rate(m.ties_differ, m.ties_samples),
        ties_odd_zp=m.ties_odd_zp,
        realistic_samples=m.realistic_samples,
        realistic_differ_u8=m.realistic_differ_u8,
        realistic_rate=_rate(m.realistic_differ_u8, m.realistic_samples),
        reciprocal_differ=m.reciprocal_differ,
        reciprocal_differ_u8=m.reciprocal_differ_u8,
        reciprocal_rate=_rate(m.reciprocal_differ, m.uniform_samples),
    )


# -- the tables (generated) --------------------------------------------------------------------


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _values(op: OpSpec, attr: Attribute) -> str:
    if attr.allowed:
        return ", ".join(f"`{value}`" for value in attr.allowed)
    if attr.name == "axis":
        return "[-r, r-1], r = rank(src)"
    if attr.name == "output_dtype":
        types = ", ".join(f"{d.onnx} ({d.name})" for d in op.dst_types)
        return f"0, {types}"
    return ""


def _default(attr: Attribute) -> str:
    if attr.required or attr.default is None:
        return "—"
    return f"`{attr.default}`"


def render_op(op: OpSpec) -> list[str]:
    kind = (
        "static: scales and zero points are attributes"
        if op.is_static
        else ("dynamic: scales and zero points are input tensors")
    )
    lines = [
        f"## {op.name}",
        "",
        f"{op.summary} ({kind}.)",
        "",
        f"    {op.formula}",
        "",
        "### Attributes",
        "",
        "| Name | Type | Required | Default | Values | Description |",
        "|:--|:--|:--|:--|:--|:--|",
    ]
    for attr in op.attributes:
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"`{attr.name}`",
                    _KIND[attr.kind],
                    "required" if attr.required else "optional",
                    _default(attr),
                    _values(op, attr),
                    attr.doc,
                )
            )
            + " |"
        )
    lines += [
        "",
        "### Inputs and outputs",
        "",
        "| Index | Argument | Direction | Required | Description |",
    ]
    lines.append("|--:|:--|:--|:--|:--|")
    for direction, arguments in (("input", op.inputs), ("output", op.outputs)):
        for index, argument in enumerate(arguments):
            lines.append(
                f"| {index} | `{argument.name}` | {direction} | "
                f"{'optional' if argument.optional else 'required'} | {_cell(argument.doc)} |"
            )
    lines += ["", "### Supported data types", ""]
    if op.is_static:
        lines += ["| src | dst |", "|:--|:--|"]
        lines += [f"| {row.src.name} | {row.dst.name} |" for row in op.type_rows]
    else:
        lines += ["| src | dst | scales | zps |", "|:--|:--|:--|:--|"]
        lines += [
            f"| {row.src.name} | {row.dst.name} | "
            f"{row.scales.name if row.scales else '—'} | "
            f"{', '.join(z.name for z in row.zps)} |"
            for row in op.type_rows
        ]
    lines.append("")
    return lines


def render(measurement: RoundingMeasurement | None = None) -> str:
    lines = [
        "# quantgraph operator specification",
        "",
        "<!-- Generated by `python -m tools.gen_spec_docs --write` from "
        "quantgraph/spec; do not edit. -->",
        "",
        f"Four operators of domain `{DOMAIN}` (opset version {OPSET_VERSION}), after the oneDNN "
        "Graph operations of the same names. The tables below are generated from "
        "`quantgraph/spec` (ops.py, rules.py), the single source of truth the converter, the "
        "ONNX schemas, the reference kernels and the native kernels all read. Data types use "
        "oneDNN's names: " + ", ".join(f"{d.name} (ONNX {d.onnx})" for d in dtypes.ALL) + ".",
        "",
    ]
    for op in OPS.values():
        lines += render_op(op)
    lines += [
        "## Rules",
        "",
        "Every rejected call reports `<Op> node '<name>': <text> [rule <id>]`, the same on every "
        "backend; fields in braces are filled in.",
        "",
        "| Rule | Text |",
        "|:--|:--|",
    ]
    lines += [f"| `{rule}` | {_cell(text)} |" for rule, text in RULES.items()]
    lines += ["", "## Decisions", "", decisions(measurement).rstrip(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return write_or_print(render, DOC_PATH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
