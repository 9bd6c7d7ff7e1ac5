"""ONNX's own QuantizeLinear/DequantizeLinear node tests, converted and run on every backend.

The expectations are ONNX's (``onnx.backend.test.case.node.collect_testcases``), written by
nobody here. For each case that has a QuantizeLinear or DequantizeLinear node:

* the case's model is made runnable in onnxruntime 1.32: its default-domain opset is lowered to
  at most 25, inputs numpy cannot feed (float8, 4-bit, 2-bit) become initializers, outputs of
  such types get a ``Cast`` to float (exact); nothing else is added (the converter infers the
  shapes and types of computed scales itself);
* the original runs unconverted in onnxruntime (``ORT_DISABLE_ALL``);
* it is converted twice: ``dynamic`` keeps the case's scale/zero-point inputs as graph inputs
  and calls ``convert(static=False)``; ``static`` freezes them into initializers and calls
  ``convert(static=True)``;
* each converted model runs on each runner: ``reference`` (onnx's ReferenceEvaluator with
  quantgraph's numpy kernels, :mod:`quantgraph.reference.evaluator`), and the ``python`` and
  ``native`` backends through :class:`quantgraph.InferenceSession` (default session options, as
  a user gets them). Every output must equal the case's expected output exactly, by
  :mod:`quantgraph.reference.compare`'s rule (bit for bit, NaN equal to NaN). A backend that raises
  :class:`BackendError` documents that it cannot express the model: "not runnable", with its
  message. Any other error is a failure.

``python -m tools.conformance --write docs/conformance.md`` writes the Markdown table;
``--json`` prints the same results as JSON; ``--check docs/conformance.md`` exits 1 when the file
differs from a fresh run in anything but the native backend's columns (see
:func:`comparable_view`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
from onnx import TensorProto, helper

from quantgraph.backends import native_available
from quantgraph.converter import convert
from quantgraph.errors import BackendError
from quantgraph.passes import QDQ_OPS
from quantgraph.reference.compare import compare, type_name
from quantgraph.runtime.session import InferenceSession
from quantgraph.spec import dtypes
from quantgraph.testing import ort_session

MAX_ORT_OPSET = 25  # onnxruntime 1.32 runs QuantizeLinear/DequantizeLinear up to opset 25
MODES = ("dynamic", "static")
# "reference": onnx's ReferenceEvaluator with quantgraph's numpy kernels
# (quantgraph.reference.evaluator);
# "python" and "native": the onnxruntime backends through quantgraph.InferenceSession.
RUNNERS = ("reference", "python", "native")
DOC_PATH = Path("docs/conformance.md")

PASS = "pass"
FAIL = "fail"
NOT_RUNNABLE = "not runnable"
NOT_BUILT = "not built"
NOT_CONVERTED = "—"
STATUSES = (PASS, FAIL, NOT_RUNNABLE, NOT_BUILT, NOT_CONVERTED)

COMPARISON = (
    "exact: integer outputs bit for bit; float outputs by value (NaN equals NaN, -0 equals +0); "
    "float8/4-bit/2-bit outputs after an exact Cast to float"
)


@dataclass(frozen=True)
class Case:
    """One data set of one ONNX node test."""

    name: str
    model: onnx.ModelProto
    inputs: tuple[Any, ...]  # np.ndarray, numpy scalar or TensorProto, in graph-input order
    outputs: tuple[Any, ...]


@dataclass(frozen=True)
class Outcome:
    """What happened to one model on one runner."""

    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}


@dataclass
class ModeResult:
    """One conversion mode of one case: what the converter did and how each backend fared."""

    mode: str
    emitted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    error: str = ""
    backends: dict[str, Outcome] = field(default_factory=dict)

    @property
    def converted(self) -> bool:
        """Every Q/DQ node of the case was rewritten."""
        return bool(self.emitted) and not self.skipped and not self.error

    @property
    def conversion(self) -> str:
        if self.error:
            return "error"
        if self.converted:
            return ", ".join(self.emitted)
        return "partial" if self.emitted else "no"

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "converted": self.converted,
            "emitted": self.emitted,
            "skipped": self.skipped,
            "error": self.error,
            "backends": {name: o.to_dict() for name, o in self.backends.items()},
        }


@dataclass
class CaseResult:
    name: str
    nodes: str
    signature: str
    original: Outcome
    modes: dict[str, ModeResult]

    @property
    def converted(self) -> bool:
        return any(m.converted for m in self.modes.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "nodes": self.nodes,
            "signature": self.signature,
            "converted": self.converted,
            "onnxruntime": self.original.to_dict(),
            "modes": {name: m.to_dict() for name, m in self.modes.items()},
        }


@dataclass
class Report:
    cases: list[CaseResult]
    backends: tuple[str, ...]
    native_built: bool

    def totals(self) -> dict[str, object]:
        per_backend: dict[str, dict[str, dict[str, int]]] = {}
        for mode in MODES:
            per_backend[mode] = {}
            for backend in self.backends:
                counts = dict.fromkeys(STATUSES, 0)
                for case in self.cases:
                    outcome = case.modes[mode].backends.get(backend)
                    if outcome is not None:
                        counts[outcome.status] += 1
                per_backend[mode][backend] = counts
        original = dict.fromkeys((PASS, FAIL, NOT_RUNNABLE), 0)
        for case in self.cases:
            original[case.original.status] += 1
        return {
            "cases": len(self.cases),
            "converted": sum(c.converted for c in self.cases),
            "not_converted": sum(not c.converted for c in self.cases),
            "converted_per_mode": {
                mode: sum(c.modes[mode].converted for c in self.cases) for mode in MODES
            },
            "onnxruntime": original,
            "backends": per_backend,
        }

    def failures(self) -> list[str]:
        """Converted cases that failed on a backend able to run them, and converter errors."""
        found: list[str] = []
        for case in self.cases:
            for mode in case.modes.values():
                if mode.error:
                    found.append(f"{case.name} {mode.mode}: converter error: {mode.error}")
                for backend, outcome in mode.backends.items():
                    if outcome.status == FAIL:
                        found.append(f"{case.name} {mode.mode} {backend}: {outcome.detail}")
        return found

    def to_dict(self) -> dict[str, object]:
        return {
            "comparison": COMPARISON,
            "native_built": self.native_built,
            "totals": self.totals(),
            "cases": [c.to_dict() for c in self.cases],
        }


# -- the cases ---------------------------------------------------------------------------------


def collect_cases() -> list[Case]:
    """Every ONNX node test whose model has a QuantizeLinear or DequantizeLinear node."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # other ops' generators overflow casts on purpose
        found = collect_testcases(None)
    cases: list[Case] = []
    for test in found:
        if test.model is None or not any(n.op_type in QDQ_OPS for n in test.model.graph.node):
            continue
        data_sets = list(test.data_sets or [])
        for index, (inputs, outputs) in enumerate(data_sets):
            name = test.name if len(data_sets) == 1 else f"{test.name}[{index}]"
            cases.append(Case(name, test.model, tuple(inputs), tuple(outputs)))
    return sorted(cases, key=lambda c: c.name)


def _feedable(data: Any) -> np.ndarray | None:
    """The data as an array onnxruntime can take from numpy, or None (float8, int4, ...)."""
    if isinstance(data, onnx.TensorProto):
        return None
    array = np.asarray(data)
    if array.dtype.kind not in "biuf" or array.dtype.type.__module__ != "numpy":
        return None
    return array


def _as_numpy(data: Any) -> np.ndarray:
    """Expected or input data as a numpy array; types numpy lacks become float32 (exactly)."""
    if isinstance(data, onnx.TensorProto):
        array = onnx.numpy_helper.to_array(data)
        if array.dtype.type.__module__ != "numpy":  # ml_dtypes: float8, int4, ...
            return np.asarray(array.astype(np.float32))
        return np.asarray(array)
    array = np.asarray(data)
    if array.dtype.type.__module__ != "numpy":
        return np.asarray(array.astype(np.float32))
    return array


def _initializer(name: str, data: Any) -> onnx.TensorProto:
    if isinstance(data, onnx.TensorProto):
        tensor = onnx.TensorProto()
        tensor.CopyFrom(data)
        tensor.name = name
        return tensor
    return onnx.numpy_helper.from_array(np.asarray(data), name)


def prepare(case: Case, *, freeze_parameters: bool) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The case's model made runnable in onnxruntime, and its feeds (see module doc)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version > MAX_ORT_OPSET:
            opset.version = MAX_ORT_OPSET
    graph = model.graph
    parameters: set[str] = set()
    if freeze_parameters:
        for node in graph.node:
            if node.op_type in QDQ_OPS:
                parameters.update(name for name in node.input[1:] if name)
    feeds: dict[str, Any] = {}
    keep = []
    for value, data in zip(graph.input, case.inputs, strict=True):
        array = _feedable(data)
        if array is None or value.name in parameters:
            graph.initializer.append(_initializer(value.name, data))
        else:
            feeds[value.name] = array
            keep.append(value)
    del graph.input[:]
    graph.input.extend(keep)
    for index, output in enumerate(list(graph.output)):
        elem = output.type.tensor_type.elem_type
        if _numpy_type(elem):
            continue
        cast_name = f"{output.name}_as_float"
        graph.node.append(
            helper.make_node(
                "Cast", [output.name], [cast_name], to=TensorProto.FLOAT, name=f"{cast_name}_cast"
            )
        )
        replacement = helper.make_tensor_value_info(cast_name, TensorProto.FLOAT, None)
        replacement.type.tensor_type.shape.CopyFrom(output.type.tensor_type.shape)
        graph.output[index].CopyFrom(replacement)
    return model, feeds


def _numpy_type(elem_type: int) -> bool:
    try:
        np_type = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        return False
    return bool(np_type.type.__module__ == "numpy")


def _describe(model: onnx.ModelProto) -> tuple[str, str]:
    """The Q/DQ op types and 'input type -> output type' of a case's model."""
    graph = onnx.shape_inference.infer_shapes(model).graph  # for the description only
    nodes = [n for n in graph.node if n.op_type in QDQ_OPS]
    ops = ", ".join(dict.fromkeys(n.op_type for n in nodes))
    types: dict[str, int] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        types[value.name] = value.type.tensor_type.elem_type
    for tensor in graph.initializer:
        types[tensor.name] = tensor.data_type
    node = nodes[0]
    source = types.get(node.input[0])
    target = types.get(node.output[0])

    def name(elem: int | None) -> str:
        return "?" if not elem else dtypes.onnx_name(elem)

    return ops, f"{name(source)} → {name(target)}"


# -- running -------------------------------------------------------------------------------------


def compare_outputs(actual: Sequence[Any], expected: Sequence[Any]) -> str | None:
    """None when every output matches (quantgraph.reference.compare's rule), else what differs."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for index, (got_raw, want_raw) in enumerate(zip(actual, expected, strict=True)):
        got, want = np.asarray(got_raw), _as_numpy(want_raw)
        result = compare(f"output {index}", want, got)
        if result.agree:
            continue
        if result.first_mismatch is None or result.max_ulp_diff < 0:
            return f"output {index}: {type_name(got.dtype)}{list(got.shape)}, expected " + (
                f"{type_name(want.dtype)}{list(want.shape)}"
            )
        first = result.first_mismatch
        return (
            f"output {index}: {result.mismatches} of {got.size} elements differ; first at flat "
            f"index {first}: got {got.reshape(-1)[first]!r}, expected {want.reshape(-1)[first]!r}"
        )
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    """The unconverted model in onnxruntime's own kernels, unfused (``ORT_DISABLE_ALL``)."""
    return list(ort_session(model).run(None, feeds))


def _original(case: Case) -> Outcome:
    model, feeds = prepare(case, freeze_parameters=False)
    try:
        outputs = run_onnxruntime(model, feeds)
    except Exception as error:  # onnxruntime has no kernel or rejects the model
        return Outcome(NOT_RUNNABLE, _first_line(error))
    problem = compare_outputs(outputs, case.outputs)
    return Outcome(FAIL, problem) if problem else Outcome(PASS)


def _on_runner(model: onnx.ModelProto, feeds: dict[str, Any], runner: str, case: Case) -> Outcome:
    if runner == "reference":
        return _on_reference(model, feeds, case)
    backend = runner
    try:
        session = InferenceSession(model, backend)
    except BackendError as error:  # the documented "this backend cannot express it"
        return Outcome(NOT_RUNNABLE, _first_line(error))
    except Exception as error:
        return Outcome(FAIL, f"session: {type(error).__name__}: {_first_line(error)}")
    try:
        outputs = session.run(None, feeds)
    except Exception as error:
        return Outcome(FAIL, f"run: {type(error).__name__}: {_first_line(error)}")
    problem = compare_outputs(outputs, case.outputs)
    return Outcome(FAIL, problem) if problem else Outcome(PASS)


def _on_reference(model: onnx.ModelProto, feeds: dict[str, Any], case: Case) -> Outcome:
    from onnx.reference import ReferenceEvaluator

    from quantgraph.reference.evaluator import REFERENCE_OPS

    try:
        with np.errstate(all="ignore"):
            outputs = ReferenceEvaluator(model, new_ops=REFERENCE_OPS).run(None, feeds)
    except Exception as error:
        return Outcome(FAIL, f"run: {type(error).__name__}: {_first_line(error)}")
    problem = compare_outputs(list(outputs), case.outputs)
    return Outcome(FAIL, problem) if problem else Outcome(PASS)


def _mode(case: Case, mode: str, backends: Sequence[str], built: dict[str, bool]) -> ModeResult:
    static = mode == "static"
    model, feeds = prepare(case, freeze_parameters=static)
    result = ModeResult(mode)
    try:
        converted = convert(model, static=static)
    except Exception as error:
        result.error = f"{type(error).__name__}: {_first_line(error)}"
        return result
    result.emitted = [n.new_op_type for n in converted.report.converted_nodes]
    result.skipped = [s.reason for s in converted.report.skipped]
    if not result.converted:
        result.backends = {b: Outcome(NOT_CONVERTED) for b in backends}
        return result
    for backend in backends:
        if not built[backend]:
            result.backends[backend] = Outcome(NOT_BUILT)
        else:
            result.backends[backend] = _on_runner(converted.proto, feeds, backend, case)
    return result


def run_case(case: Case, backends: Sequence[str] = RUNNERS) -> CaseResult:
    built = {b: (native_available() if b == "native" else True) for b in backends}
    ops, signature = _describe(prepare(case, freeze_parameters=False)[0])
    return CaseResult(
        case.name,
        ops,
        signature,
        _original(case),
        {mode: _mode(case, mode, backends, built) for mode in MODES},
    )


def run_all(backends: Sequence[str] = RUNNERS, cases: Iterable[Case] | None = None) -> Report:
    chosen = tuple(b for b in RUNNERS if b in backends)
    found = collect_cases() if cases is None else list(cases)
    return Report([run_case(c, chosen) for c in found], chosen, native_available())


# -- the document ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _notes(case: CaseResult) -> str:
    """Why a case is not converted or not runnable; nothing about the native backend."""
    notes: list[str] = []
    if case.original.status != PASS:
        notes.append(f"onnxruntime: {case.original.detail}")
    reasons: dict[str, list[str]] = {}
    for mode in case.modes.values():
        for reason in [mode.error, *mode.skipped]:
            if reason:
                reasons.setdefault(reason, []).append(mode.mode)
        for runner in ("reference", "python"):
            outcome = mode.backends.get(runner)
            if outcome is not None and outcome.status in (FAIL, NOT_RUNNABLE):
                notes.append(f"{mode.mode} {runner}: {outcome.detail}")
    for reason, modes in reasons.items():
        notes.append(f"{' and '.join(modes)} not converted: {reason}")
    return "; ".join(notes)


def render_markdown(report: Report) -> str:
    totals = report.totals()
    lines = [
        "# Conformance: ONNX's QuantizeLinear/DequantizeLinear node tests",
        "",
        "<!-- Generated by `python -m tools.conformance --write docs/conformance.md`; "
        "do not edit. -->",
        "",
        "Every ONNX backend node test with a QuantizeLinear or DequantizeLinear node "
        "(`onnx.backend.test.case.node.collect_testcases(None)`, onnx "
        f"{onnx.__version__}), run against the case's own expected outputs, not ours. "
        "How each case is prepared and run is described in `tools/conformance.py`: "
        f"default-domain opset lowered to {MAX_ORT_OPSET} for onnxruntime {ort.__version__}, "
        "inputs numpy cannot feed (float8, 4-bit, 2-bit) made initializers, such outputs cast "
        "to float; models are converted as they are (no shape inference added).",
        "",
        "- **onnxruntime**: the unconverted model in onnxruntime's own kernels "
        "(`ORT_DISABLE_ALL`).",
        "- **dynamic**: `quantgraph.convert(model)` with the case's scales and zero points fed "
        "at run time; the cell names the emitted ops, or `no` when the converter left the node.",
        "- **static**: scales and zero points frozen into initializers, "
        "`quantgraph.convert(model, static=True)`.",
        "- Runner columns: **reference** is onnx's ReferenceEvaluator with quantgraph's numpy "
        "kernels; **python** and **native** are the onnxruntime backends "
        "(`quantgraph.InferenceSession`). Cells: `pass`, `fail`, `not runnable` (the backend "
        "documents it cannot express the case: `BackendError`), `not built`, or "
        f"`{NOT_CONVERTED}` when the converter left the node.",
        f"- Comparison: {COMPARISON}.",
        "",
        f"Native backend: {'built' if report.native_built else 'not built'} when this file was "
        "generated. tests/test_conformance.py compares this file with a fresh run in every "
        "column but the native backend's, so it holds whether or not native is built.",
        "",
        "## Totals",
        "",
        f"- Cases: {totals['cases']}; converted (in at least one mode): {totals['converted']}; "
        f"not converted: {totals['not_converted']}.",
    ]
    per_mode = totals["converted_per_mode"]
    assert isinstance(per_mode, dict)
    lines.append(
        "- Converted per mode: " + ", ".join(f"{mode} {per_mode[mode]}" for mode in MODES) + "."
    )
    lines += [
        "",
        "| Runner | pass | fail | not runnable | not built | not converted |",
        "|:--|--:|--:|--:|--:|--:|",
    ]
    original = totals["onnxruntime"]
    assert isinstance(original, dict)
    lines.append(
        f"| onnxruntime (unconverted) | {original[PASS]} | {original[FAIL]} | "
        f"{original[NOT_RUNNABLE]} | 0 | 0 |"
    )
    per_backend = totals["backends"]
    assert isinstance(per_backend, dict)
    for mode in MODES:
        for backend in report.backends:
            c = per_backend[mode][backend]
            lines.append(
                f"| {mode} {backend} | {c[PASS]} | {c[FAIL]} | {c[NOT_RUNNABLE]} | "
                f"{c[NOT_BUILT]} | {c[NOT_CONVERTED]} |"
            )
    header = ["Case", "Node", "Types", "onnxruntime"]
    for mode in MODES:
        header.append(mode)
        header += [f"{mode} {backend}" for backend in report.backends]
    header.append("Notes")
    lines += [
        "",
        "## Cases",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":--" for _ in header) + "|",
    ]
    for case in report.cases:
        row = [f"`{case.name}`", case.nodes, case.signature, case.original.status]
        for mode_name in MODES:
            result = case.modes[mode_name]
            row.append(result.conversion)
            row += [result.backends[b].status for b in report.backends]
        row.append(_notes(case))
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    native_notes = [
        f"- `{case.name}` {mode.mode} native: {mode.backends['native'].status}: "
        f"{mode.backends['native'].detail}"
        for case in report.cases
        for mode in case.modes.values()
        if "native" in mode.backends and mode.backends["native"].status in (FAIL, NOT_RUNNABLE)
    ]
    if native_notes:
        lines += ["", "## Native backend details", "", *native_notes]
    lines.append("")
    return "\n".join(lines)


def comparable_view(markdown: str) -> str:
    """The document without anything that depends on whether the native backend is built.

    Drops table columns whose header names native, table rows whose first cell names native,
    and every other line that mentions native. What remains (onnxruntime, converter and python
    backend results, totals of those) must equal a fresh run's.
    """
    kept: list[str] = []
    native_columns: set[int] | None = None  # None: the next table line is a header
    for line in markdown.splitlines():
        if not line.startswith("|"):
            native_columns = None
            if "native" not in line.lower():
                kept.append(line)
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line.strip()[1:-1])]
        if native_columns is None:
            native_columns = {i for i, c in enumerate(cells) if "native" in c.lower()}
        elif "native" in cells[0].lower():
            continue
        kept.append(" | ".join(c for i, c in enumerate(cells) if i not in native_columns))
    # Dropped sections leave blank lines behind: blank lines are not content.
    return "\n".join(line for line in kept if line.strip())


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.conformance",
        description="Run ONNX's QuantizeLinear/DequantizeLinear node tests on quantgraph.",
    )
    parser.add_argument("--write", metavar="PATH", help="write the Markdown table to PATH")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--check",
        metavar="PATH",
        help="exit 1 when PATH differs from a fresh run (native columns aside)",
    )
    parser.add_argument(
        "--backends",
        default=",".join(RUNNERS),
        help=f"comma-separated backends (default: {','.join(RUNNERS)})",
    )
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(RUNNERS))
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {', '.join(RUNNERS)}")
    report = run_all(backends)
    markdown = render_markdown(report)
    status = 0
    if args.write:
        target = Path(args.write)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(markdown)
        print(f"wrote {target}", file=sys.stderr)
    if args.check:
        current = Path(args.check).read_text() if Path(args.check).exists() else ""
        if comparable_view(current) != comparable_view(markdown):
            print(f"{args.check} is out of date: run --write {args.check}", file=sys.stderr)
            status = 1
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    elif not args.write and not args.check:
        sys.stdout.write(markdown)
    failures = report.failures()
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures else status


if __name__ == "__main__":
    raise SystemExit(main())
