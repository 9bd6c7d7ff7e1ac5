"""oneDNN against its own spec and against ONNX: every spec type row and qtype, run on the same
data by the reference, the native backend (both arithmetics) and the onednn backend.

For each op, type row (src -> dst, scales, zps type or none), qtype (per_tensor; per_channel on a
middle and on the last axis; per_group along the last and the second-last dim) and data set
(``random`` normal values, exact-ish ``ties`` x = (k + 0.5) * s, ``extremes`` at and beyond the
quantized range, ``specials`` NaN / +-inf / -0 / subnormals), one single-node model is made with
its inputs as initializers and run by:

* ``reference``: :func:`quantgraph.reference.run`, ONNX's arithmetic (the spec's composition as
  onnxruntime computes it), and with ``arithmetic="onednn"`` the numpy model of oneDNN's
  (:mod:`quantgraph.reference.onednn_arithmetic`);
* ``native``: :class:`quantgraph.InferenceSession` on the native backend, ``onnx`` arithmetic;
* ``native onednn``: the native backend with ``arithmetic="onednn"``;
* ``onednn``: the onednn backend: oneDNN's Graph API, the oneDNN this process loaded.

Cells count differing elements by :mod:`quantgraph.reference.compare`'s rule (NaN equals NaN). A row
oneDNN (or quantgraph, for oneDNN's sake) refuses is marked with the message.

``python -m tools.onednn_conformance --write docs/onednn.md`` writes the page for the oneDNN
found by the onednn backend (``QUANTGRAPH_ONEDNN_LIBRARY`` picks another; each oneDNN needs its own
process); ``--append`` adds (or replaces) that oneDNN's section of an existing page; ``--check``
exits 1 when that section is not current (tests/onednn runs it for the installed oneDNN);
``--json`` prints the results.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from quantgraph import reference
from quantgraph.errors import BackendError, one_line
from quantgraph.reference.compare import compare
from quantgraph.spec import DOMAIN, OPS, PER_CHANNEL, PER_GROUP, PER_TENSOR, dtypes
from quantgraph.spec.ops import OpSpec, TypeRow
from quantgraph.testing import Input, one_op_model, quiet_session_options

DOC_PATH = Path("docs/onednn.md")
DATA_SETS = ("random", "ties", "extremes", "specials")
TIE_SCALE = np.float32(0.0123)  # the scale of the measured fact (172 of 4,096 ties differ)
RUNNERS = ("native", "native onednn", "onednn")
REFUSED = "refused"


@dataclass(frozen=True)
class Layout:
    """Where the parameters vary: a qtype with its axis or group shape, on a src shape."""

    name: str
    qtype: str
    shape: tuple[int, ...]
    axis: int | None = None
    group_shape: tuple[int, ...] | None = None

    @property
    def parameter_shape(self) -> tuple[int, ...]:
        if self.qtype == PER_TENSOR:
            return (1,)
        if self.qtype == PER_CHANNEL:
            assert self.axis is not None
            return (self.shape[self.axis],)
        assert self.group_shape is not None
        return tuple(d // g for d, g in zip(self.shape, self.group_shape, strict=True))


LAYOUTS = (
    Layout("per_tensor", PER_TENSOR, (4, 8, 32)),
    Layout("per_channel axis 1", PER_CHANNEL, (4, 8, 32), axis=1),
    Layout("per_channel last axis", PER_CHANNEL, (4, 8, 32), axis=2),
    Layout("per_group 1x8 (last dim)", PER_GROUP, (2, 16, 32), group_shape=(1, 1, 8)),
    Layout("per_group 8x1 (second-last dim)", PER_GROUP, (2, 16, 32), group_shape=(1, 8, 1)),
)


@dataclass(frozen=True)
class Case:
    op: OpSpec
    row: TypeRow
    zps: dtypes.DType | None
    layout: Layout
    data: str

    @property
    def label(self) -> str:
        zps = self.zps.name if self.zps is not None else "none"
        return f"{self.op.name} {self.row.src.name}->{self.row.dst.name} zps {zps}"


@dataclass
class Result:
    op: str
    types: str
    scales: str
    zps: str
    layout: str
    data: str
    elements: int
    # per runner: differing elements vs the ONNX reference, or REFUSED; and vs the oneDNN model
    vs_onnx: dict[str, int | str]
    vs_onednn_model: dict[str, int | str]
    refusals: dict[str, str]
    onednn_vs_native_onednn: int | None
    # oneDNN differs from the model of its arithmetic only where src is NaN: what each gives
    nan_only: bool = False
    nan_values: str = ""


def cases() -> Iterator[Case]:
    for op in OPS.values():
        qtypes = op.attribute("qtype").allowed
        for row in op.type_rows:
            zps_choices: Sequence[dtypes.DType | None]
            if op.is_static:
                zps_choices = (
                    (None,) if row.src.is_float8 or row.dst.is_float8 else (None, dtypes.S32)
                )
            else:
                zps_choices = (None, *row.zps)
            for zps in zps_choices:
                if op.is_quantize and zps in (dtypes.S8, dtypes.U8) and zps != row.dst:
                    continue  # s8/u8 zps decide the dst: this row is the other one's
                for layout in LAYOUTS:
                    if layout.qtype not in qtypes:
                        continue
                    for data in DATA_SETS if op.is_quantize else ("random", "extremes"):
                        yield Case(op, row, zps, layout, data)


def _rng(case: Case) -> np.random.Generator:
    key = f"{case.label}|{case.layout.name}|{case.data}".encode()
    return np.random.default_rng(zlib.crc32(key))  # the same data in every process


def _scales(case: Case, rng: np.random.Generator) -> np.ndarray:
    shape = case.layout.parameter_shape
    if case.data == "ties":
        values = np.full(shape, TIE_SCALE, np.float32)
    else:
        values = rng.uniform(0.001, 0.1, size=shape).astype(np.float32)
    scales_type = case.row.scales or dtypes.F32
    return values.astype(scales_type.numpy)


def _zps(case: Case, rng: np.random.Generator) -> np.ndarray | None:
    if case.zps is None:
        return None
    shape = case.layout.parameter_shape
    if case.zps == dtypes.S32:
        quantized = case.row.dst if case.op.is_quantize else case.row.src
        low, high = quantized.int_range if quantized.is_integer else (-8, 8)
        return rng.integers(low // 2, high // 2 + 1, size=shape).astype(np.int32)
    low, high = case.zps.int_range
    if case.data == "ties":
        return np.full(shape, (low + high + 1) // 2, case.zps.numpy)
    return rng.integers(low, high + 1, size=shape).astype(case.zps.numpy)


def _float_src(case: Case, rng: np.random.Generator, scales: np.ndarray) -> np.ndarray:
    shape = case.layout.shape
    if case.data == "random":
        return (rng.standard_normal(shape) * 2.0).astype(np.float32)
    if case.data == "ties":
        k = rng.integers(-140, 140, size=shape)
        return ((k + 0.5) * np.float32(scales.reshape(-1)[0])).astype(np.float32)
    if case.data == "extremes":
        picks = np.array(
            [
                3.4e38,
                -3.4e38,
                1e10,
                -1e10,
                1e5,
                -1e5,
                127.5,
                -128.5,
                255.5,
                448.0,
                464.0,
                57344.0,
                65520.0,
            ],
            np.float32,
        )
        return rng.choice(picks, size=shape).astype(np.float32)
    picks = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 1e-40], np.float32)
    return rng.choice(picks, size=shape).astype(np.float32)


def _quantized_src(case: Case, rng: np.random.Generator) -> np.ndarray:
    src = case.row.src
    shape = case.layout.shape
    if src.is_float8:
        values = rng.standard_normal(shape).astype(np.float32) * 16
        if case.data == "extremes":
            values = rng.choice(
                np.array([src.float8_max, -src.float8_max, np.nan, 0.0], np.float32), size=shape
            )
        return values.astype(src.numpy)
    low, high = src.int_range
    if case.data == "extremes":
        return rng.choice(np.array([low, high], np.int64), size=shape).astype(src.numpy)
    return rng.integers(low, high + 1, size=shape).astype(src.numpy)


def _attributes(case: Case, scales: np.ndarray, zps: np.ndarray | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {"qtype": case.layout.qtype}
    if case.layout.axis is not None:
        attributes["axis"] = case.layout.axis
    if case.layout.group_shape is not None:
        attributes["group_shape"] = list(case.layout.group_shape)
    if case.op.is_static:
        attributes["scales"] = [float(s) for s in scales.reshape(-1)]
        if zps is not None:
            attributes["zps"] = [int(z) for z in zps.reshape(-1)]
    decided_by_zps = case.zps in (dtypes.S8, dtypes.U8) and not case.op.is_static
    if case.op.is_quantize and not decided_by_zps and case.row.dst != dtypes.U8:
        attributes["output_dtype"] = case.row.dst.onnx
    return attributes


def _model(
    case: Case,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    attributes: dict[str, Any],
) -> onnx.ModelProto:
    inputs: dict[str, Input] = {"src": src}
    if not case.op.is_static:
        inputs["scales"] = scales
        if zps is not None:
            inputs["zps"] = zps
    # onnxruntime hands no float8/bfloat16 to numpy: dst is cast to f32 (the cast is exact).
    cast = case.row.dst.is_float8 or case.row.dst == dtypes.BF16
    return one_op_model(
        case.op.name,
        inputs,
        {"dst": None},
        domain=DOMAIN,
        float_output="out" if cast else None,
        graph_name="onednn_conformance",
        **attributes,
    )


def _run(model: onnx.ModelProto, backend: str, arithmetic: str | None) -> np.ndarray | str:
    from quantgraph.runtime.session import InferenceSession

    try:  # refusals are results here, not log lines
        options = quiet_session_options(optimize=True)  # InferenceSession sets what it needs
        session = InferenceSession(model, backend, arithmetic=arithmetic, options=options)
        return np.asarray(session.run(None, {})[0])
    except BackendError as error:
        return one_line(error)
    except Exception as error:  # onnxruntime's errors carry oneDNN's refusal
        return one_line(error)


def _as_compared(values: np.ndarray, case: Case) -> np.ndarray:
    if case.row.dst.is_float8 or case.row.dst == dtypes.BF16:
        return values.astype(np.float32)
    return values


def run_case(case: Case) -> Result:
    rng = _rng(case)
    scales = _scales(case, rng)
    zps = _zps(case, rng)
    if case.op.is_quantize:
        src = _float_src(case, rng, scales.astype(np.float32))
    else:
        src = _quantized_src(case, rng)
    attributes = _attributes(case, scales, zps)
    inputs = [src] if case.op.is_static else [src, scales, zps]
    want = _as_compared(reference.run(case.op, inputs, attributes), case)
    model_onednn = _as_compared(
        reference.run(case.op, inputs, attributes, arithmetic="onednn"), case
    )
    model = _model(case, src, scales, zps, attributes)
    vs_onnx: dict[str, int | str] = {}
    vs_model: dict[str, int | str] = {}
    refusals: dict[str, str] = {}
    outputs: dict[str, np.ndarray] = {}
    for runner in RUNNERS:
        backend, arithmetic = (
            ("onednn", None)
            if runner == "onednn"
            else ("native", "onednn" if runner == "native onednn" else "onnx")
        )
        got = _run(model, backend, arithmetic)
        if isinstance(got, str):
            vs_onnx[runner] = vs_model[runner] = REFUSED
            refusals[runner] = got
            continue
        outputs[runner] = got
        vs_onnx[runner] = compare("dst", want, got).mismatches
        vs_model[runner] = compare("dst", model_onednn, got).mismatches
    both = outputs.keys() >= {"onednn", "native onednn"}
    nan_only, nan_values = False, ""
    if "onednn" in outputs and vs_model["onednn"] != 0 and case.op.is_quantize:
        off = _mismatch_positions(model_onednn, outputs["onednn"])
        nan_only = bool(np.all(np.isnan(src.reshape(-1)[off])))
        if nan_only:
            found = sorted({int(v) for v in outputs["onednn"].reshape(-1)[off]})
            modelled = sorted({int(v) for v in model_onednn.reshape(-1)[off]})
            nan_values = (
                f"NaN -> {found} (oneDNN before v3.7; v3.7+ and ONNX, as modelled: {modelled})"
            )
    return Result(
        case.op.name,
        f"{case.row.src.name} -> {case.row.dst.name}",
        (case.row.scales or dtypes.F32).name,
        case.zps.name if case.zps is not None else "-",
        case.layout.name,
        case.data,
        int(src.size),
        vs_onnx,
        vs_model,
        refusals,
        compare("dst", outputs["native onednn"], outputs["onednn"]).mismatches if both else None,
        nan_only,
        nan_values,
    )


def _mismatch_positions(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    from quantgraph.reference.compare import mismatch_mask

    return np.flatnonzero(mismatch_mask(np.asarray(expected), np.asarray(actual)))


def _count(value: int | str | None, elements: int) -> str:
    if value is None:
        return "—"
    if value == REFUSED:
        return REFUSED
    return "0" if value == 0 else f"{value}/{elements}"


def _note(group: Sequence[Result]) -> str:
    refused = [r for r in group if "onednn" in r.refusals]
    if refused:
        message = refused[0].refusals["onednn"].replace("|", "/")
        if len(refused) == len(group):
            return message
        return f"runs when every zero point is 0 (passed to oneDNN as absent), else: {message}"
    notes = []
    if any(r.vs_onnx["onednn"] != 0 and r.vs_onednn_model["onednn"] == 0 for r in group):
        first = group[0]
        if first.op.endswith("Dequantize"):
            notes.append("oneDNN's dequantize: float8 -0 gives +0, s32 zps pass through float")
        elif "f8" in first.types:
            notes.append(
                "float8 through f16 (two roundings), unsaturated: overflow is NaN "
                "(e4m3) or inf (e5m2)"
            )
        else:
            notes.append("ties: oneDNN rounds fl(fl(x * fl(1/s)) + zp) once")
    notes.extend(sorted({r.nan_values for r in group if r.nan_only}))
    if any(r.vs_onednn_model["onednn"] != 0 and not r.nan_only for r in group):
        notes.append("UNEXPLAINED: oneDNN differs from ONNX and from the model of its arithmetic")
    if any(r.onednn_vs_native_onednn not in (0, None) and not r.nan_only for r in group):
        notes.append("UNEXPLAINED: native onednn arithmetic differs from oneDNN")
    return "; ".join(notes)


def _groups(results: Sequence[Result]) -> dict[tuple[str, ...], dict[str, Result]]:
    grouped: dict[tuple[str, ...], dict[str, Result]] = {}
    for r in results:
        grouped.setdefault((r.op, r.types, r.scales, r.zps, r.layout), {})[r.data] = r
    return grouped


def markdown_section(results: Sequence[Result], engine: str) -> str:
    """One row per op, types, zps and layout; per data set, the elements where oneDNN differs
    from ONNX's arithmetic; then whether the model and the native onednn arithmetic agree."""
    grouped = _groups(results)
    ran = [g for g in grouped.values() if not any("onednn" in r.refusals for r in g.values())]
    partly = [
        g
        for g in grouped.values()
        if g not in ran and not all("onednn" in r.refusals for r in g.values())
    ]
    differing = [g for g in ran if any(r.vs_onnx["onednn"] != 0 for r in g.values())]
    model_off = [
        g
        for g in ran
        if any(r.vs_onednn_model["onednn"] != 0 and not r.nan_only for r in g.values())
    ]
    nan_off = [g for g in ran if any(r.nan_only for r in g.values())]
    native_off = [
        g
        for g in ran
        if any(r.onednn_vs_native_onednn not in (0, None) and not r.nan_only for r in g.values())
    ]
    native_onnx_off = [
        g
        for g in grouped.values()
        if any(r.vs_onnx["native"] not in (0, REFUSED) for r in g.values())
    ]
    lines = [
        f"## {engine}",
        "",
        f"- Rows (op, types, zps, layout): {len(grouped)}; oneDNN ran {len(ran)} on every data "
        f"set, refused {len(grouped) - len(ran)} ({len(partly)} of them only where a zero point "
        "is not 0).",
        f"- oneDNN differs from ONNX's arithmetic in {len(differing)} of the rows it ran; from "
        "the model of its own arithmetic (`quantgraph.reference.onednn_arithmetic`) in "
        f"{len(model_off)} "
        f"(and only on NaN inputs in {len(nan_off)}).",
        f"- The native backend's `onednn` arithmetic differs from oneDNN in {len(native_off)} "
        "rows (NaN inputs aside); its default `onnx` arithmetic differs from the reference in "
        f"{len(native_onnx_off)}.",
        "",
        "| Op | Types | Scales | zps | Layout | "
        + " | ".join(f"{d} vs ONNX" for d in DATA_SETS)
        + " | native onednn = onednn | Note |",
        "|:--|:--|:--|:--|:--|" + "--:|" * len(DATA_SETS) + ":--|:--|",
    ]
    for key, by_data in grouped.items():
        any_result = next(iter(by_data.values()))
        counts = [
            _count(by_data[d].vs_onnx["onednn"], by_data[d].elements) if d in by_data else "—"
            for d in DATA_SETS
        ]
        both = [r.onednn_vs_native_onednn for r in by_data.values()]
        if any(b is None for b in both):
            same = "—"
        else:
            same = "yes" if all(b == 0 for b in both) else "no"
            if same == "no" and all(
                r.nan_only or r.onednn_vs_native_onednn == 0 for r in by_data.values()
            ):
                same = "yes (NaN aside)"
        del any_result
        lines.append(
            f"| {' | '.join(key)} | {' | '.join(counts)} | {same} | "
            f"{_note(list(by_data.values()))} |"
        )
    return "\n".join(lines) + "\n"


HEADER = """# oneDNN conformance: what oneDNN computes, row by row

<!-- Generated by `python -m tools.onednn_conformance`; do not edit. -->

Every type row and qtype of the spec (`quantgraph.spec`), run on the same data by quantgraph's
reference (ONNX's arithmetic), the native backend in both arithmetics, and the onednn backend
(oneDNN's Graph API, single-op partitions on its CPU engine). How cases are made: see
`tools/onednn_conformance.py`. Counts are differing elements by `quantgraph.reference.compare`
(NaN equals NaN). `refused`: oneDNN (or quantgraph, where oneDNN would be silently wrong) does
not run the row; the note gives the message.

Expected differences (`quantgraph/reference/onednn_arithmetic.py` models them; `fl` is one float32
rounding): oneDNN quantizes as `saturate(rne(fl(fl(x * fl(1/s)) + fl(zp))))`, ONNX as
`saturate(rne(x / s) + zp)`, so values at or near .5 ties differ by one step; float8 quantize goes
through f16 and does not saturate (e4m3 overflow becomes NaN, e5m2 inf); NaN quantizes to s8 127
before oneDNN v3.7 (qmin, as ONNX, since). Dequantize is ONNX's `(x - zp) * s` except that float8
-0 gives +0 and s32 zero points beyond 2**24 are rounded to float first.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the page (one section: this oneDNN)")
    parser.add_argument("--append", type=Path, help="add this oneDNN's section to a page")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--check", type=Path, help="exit 1 when this oneDNN's section of the page is not current"
    )
    args = parser.parse_args(argv)
    from quantgraph.backends import onednn

    reason = onednn.unavailable_reason()
    if reason is not None:
        print(f"onednn_conformance: {reason}", file=sys.stderr)
        return 2
    engine = onednn.version()
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # refusals are results here, not log lines
    results = [run_case(case) for case in cases()]
    if args.json:
        print(json.dumps({"engine": engine, "results": [asdict(r) for r in results]}, indent=1))
    section = markdown_section(results, engine.split(" (")[0])
    if args.write:
        args.write.write_text(HEADER + "\n" + section)
    if args.append:
        page = args.append.read_text()
        old = section_of(page, section.splitlines()[0])
        page = page.replace(old, section) if old else page + "\n" + section
        args.append.write_text(page)
    if args.check:
        found = section_of(args.check.read_text(), section.splitlines()[0])
        if found != section:
            print(
                f"{args.check}: the {engine} section is not current; regenerate it "
                "(see the module docstring)",
                file=sys.stderr,
            )
            return 1
    if not (args.json or args.write or args.append or args.check):
        print(section)
    return 0


def section_of(page: str, heading: str) -> str | None:
    """The section of ``page`` that starts with ``heading`` (up to the next one), or None."""
    lines = page.splitlines(keepends=True)
    if heading + "\n" not in lines:
        return None
    start = lines.index(heading + "\n")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end]).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.exit(main())
