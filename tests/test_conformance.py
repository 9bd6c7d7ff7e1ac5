"""ONNX's own QuantizeLinear/DequantizeLinear node tests, converted, on every runner.

One run of the whole collection (``tools.conformance.run_all``) feeds every test here.
docs/conformance.md is checked by regenerating it and comparing everything but the native
backend's columns (``comparable_view``): the python backend, the reference and the converter
behave the same on every machine, the native column depends on whether the C++ library is built
where the file was written; the native results themselves are asserted by
``test_converted_cases_pass``, which runs native whenever it is built.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from quantgraph.backends import native_available
from tools import conformance
from tools.conformance import (
    FAIL,
    NOT_BUILT,
    NOT_CONVERTED,
    NOT_RUNNABLE,
    PASS,
    Outcome,
    Report,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "conformance.md"

# What the converter must keep converting (a converter that converts nothing would pass the
# rest vacuously). s8/u8 per-tensor and per-axis in both modes; float8 only with constant
# scales (the spec's float8 ops are the static ones).
DYNAMIC_CONVERTED = {
    "test_dequantizelinear",
    "test_dequantizelinear_axis",
    "test_dynamicquantizelinear_expanded",
    "test_dynamicquantizelinear_max_adjusted_expanded",
    "test_dynamicquantizelinear_min_adjusted_expanded",
    "test_quantizelinear",
    "test_quantizelinear_axis",
    # oneDNN v3.13's DynamicDequantize rows: blocked (per_group), int4 and uint4.
    "test_dequantizelinear_blocked",
    "test_dequantizelinear_int4",
    "test_dequantizelinear_uint4",
}
STATIC_ONLY = {
    "test_dequantizelinear_e4m3fn",
    "test_dequantizelinear_e4m3fn_zero_point",
    "test_dequantizelinear_e5m2",
    "test_quantizelinear_e4m3fn",
    "test_quantizelinear_e5m2",
}
FLOAT8_CASES = STATIC_ONLY
FOUR_BIT_CASES = {"test_dequantizelinear_int4", "test_dequantizelinear_uint4"}
# Documented limits of the python backend (quantgraph/backends/python/ops.py): no float8 (static
# mode only: dynamic mode does not convert float8 with run-time scales), no 4-bit.
PYTHON_NOT_RUNNABLE = {"dynamic": FOUR_BIT_CASES, "static": FLOAT8_CASES | FOUR_BIT_CASES}

RUNNERS = [
    "reference",
    "python",
    pytest.param(
        "native",
        marks=pytest.mark.skipif(not native_available(), reason="native backend not built"),
    ),
]


@pytest.fixture(scope="module")
def report() -> Report:
    return conformance.run_all()


def test_collection_has_every_qdq_case(report: Report) -> None:
    names = {case.name for case in report.cases}
    assert len(names) == len(report.cases) == 30
    assert names >= DYNAMIC_CONVERTED | STATIC_ONLY
    assert all(case.nodes in ("QuantizeLinear", "DequantizeLinear") for case in report.cases)


def test_onnxruntime_runs_the_originals(report: Report) -> None:
    """The harness itself is right: onnxruntime reproduces ONNX's expected outputs for every
    case it has kernels for (float4e2m1 it has none for at opset 25)."""
    for case in report.cases:
        if "float4e2m1" in case.name:
            assert case.original.status == NOT_RUNNABLE, case.name
            assert "NOT_IMPLEMENTED" in case.original.detail
        else:
            assert case.original.status == PASS, (case.name, case.original.detail)


def test_converter_converts_what_the_spec_expresses(report: Report) -> None:
    dynamic = {c.name for c in report.cases if c.modes["dynamic"].converted}
    static = {c.name for c in report.cases if c.modes["static"].converted}
    assert dynamic == DYNAMIC_CONVERTED
    assert static == DYNAMIC_CONVERTED | STATIC_ONLY
    for case in report.cases:
        for mode in case.modes.values():
            assert not mode.error, (case.name, mode.mode, mode.error)
            if not mode.converted:
                assert mode.skipped, f"{case.name} {mode.mode}: not converted and no reason"
                assert all(o.status == NOT_CONVERTED for o in mode.backends.values())


def test_static_mode_emits_static_ops_for_constant_parameters(report: Report) -> None:
    emitted = {c.name: c.modes["static"].emitted for c in report.cases}
    assert emitted["test_quantizelinear_axis"] == ["Quantize"]
    assert emitted["test_dequantizelinear_axis"] == ["Dequantize"]
    assert emitted["test_dequantizelinear_e5m2"] == ["Dequantize"]
    # The expanded DynamicQuantizeLinear computes its scale in the graph: dynamic op.
    assert emitted["test_dynamicquantizelinear_expanded"] == ["DynamicQuantize"]
    assert report.cases[0].modes["dynamic"].emitted == ["DynamicDequantize"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_converted_cases_pass(report: Report, runner: str) -> None:
    """Every converted case passes on every runner that can run it."""
    assert runner in report.backends
    failures = []
    for case in report.cases:
        for mode in case.modes.values():
            outcome = mode.backends[runner]
            if mode.converted and outcome.status != PASS:
                failures.append(f"{case.name} {mode.mode}: {outcome.status}: {outcome.detail}")
    if runner == "python":
        allowed = [
            f
            for f in failures
            if f.split()[0] in PYTHON_NOT_RUNNABLE[f.split()[1].rstrip(":")]
            and f": {NOT_RUNNABLE}: python backend:" in f
        ]
        assert len(allowed) == sum(len(cases) for cases in PYTHON_NOT_RUNNABLE.values())
        failures = [f for f in failures if f not in allowed]
    assert not failures, "\n".join(failures)


def test_document_is_up_to_date(report: Report) -> None:
    """docs/conformance.md equals a fresh run, native columns aside (see module doc)."""
    fresh = conformance.render_markdown(report)
    assert DOC.exists(), "run: python -m tools.conformance --write docs/conformance.md"
    assert conformance.comparable_view(DOC.read_text()) == conformance.comparable_view(fresh), (
        "docs/conformance.md is out of date: python -m tools.conformance --write "
        "docs/conformance.md"
    )


def _with_native(report: Report, status: str, detail: str = "") -> Report:
    cases = []
    for case in report.cases:
        modes = {}
        for name, mode in case.modes.items():
            backends = dict(mode.backends)
            if backends["native"].status != NOT_CONVERTED:
                backends["native"] = Outcome(status, detail)
            modes[name] = replace(mode, backends=backends)
        cases.append(replace(case, modes=modes))
    return Report(cases, report.backends, status != NOT_BUILT)


def test_comparable_view_ignores_only_native(report: Report) -> None:
    built = conformance.render_markdown(_with_native(report, PASS))
    missing = conformance.render_markdown(_with_native(report, NOT_BUILT))
    broken = conformance.render_markdown(_with_native(report, FAIL, "boom | with a pipe"))
    assert built != missing
    assert "boom" in broken
    view = conformance.comparable_view(built)
    assert view == conformance.comparable_view(missing) == conformance.comparable_view(broken)
    header = next(line for line in view.splitlines() if line.startswith("Case |"))
    assert "native" not in header
    assert "static python" in header
    assert any(line.startswith("static python | ") for line in view.splitlines())
    # A python change is not hidden.
    changed = built.replace(
        "| DynamicDequantize | pass | pass |", "| DynamicDequantize | pass | fail |", 1
    )
    assert changed != built
    assert conformance.comparable_view(changed) != view


def test_totals_and_json(report: Report) -> None:
    data = json.loads(json.dumps(report.to_dict()))
    totals = data["totals"]
    assert totals["cases"] == 30
    assert totals["converted"] == len(DYNAMIC_CONVERTED | STATIC_ONLY)
    assert totals["converted"] + totals["not_converted"] == totals["cases"]
    for mode in ("dynamic", "static"):
        for counts in totals["backends"][mode].values():
            assert sum(counts.values()) == totals["cases"]
            assert counts[FAIL] == 0
    for mode, cases in PYTHON_NOT_RUNNABLE.items():
        assert totals["backends"][mode]["python"][NOT_RUNNABLE] == len(cases)
    assert {c["name"] for c in data["cases"]} == {c.name for c in report.cases}


def test_cli(
    report: Report,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(conformance, "run_all", lambda backends: report)
    target = tmp_path / "conformance.md"
    assert conformance.main(["--write", str(target)]) == 0
    assert target.read_text() == conformance.render_markdown(report)
    assert conformance.main(["--check", str(target)]) == 0
    target.write_text(target.read_text().replace("| pass |", "| fail |", 1))
    assert conformance.main(["--check", str(target)]) == 1
    capsys.readouterr()
    assert conformance.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["cases"] == 30
