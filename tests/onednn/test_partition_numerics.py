"""validate --fusion onednn --intermediate explains where oneDNN's partitions part from the spec
(issue #33): each partition runs alone on the spec composition's tensors (the original at
ORT_DISABLE_ALL) and what it introduces is told apart from what it inherits upstream.

Bounds measured on this repository's models and a detector-like CNN (10 samples): with
|weights| <= 64 (quantize_static's reduce_range) a partition introduces at most 1 step on any
CPU; without VNNI, partitions with int8 products saturate (up to 38 steps measured).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.fusion.onednn import onednn_library
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs, validate
from quantgraph.validation.onednn.partitions import Partitions
from quantgraph.validation.report import ValidationReport
from tests.onednn import detector
from tests.test_fusion_onednn import requires_kernel

pytestmark = requires_kernel
ROOT = Path(__file__).resolve().parents[2]
# Measured: 1 step at most per partition without saturation; one step of margin.
PER_PARTITION = 2.0 + 1e-5
SAMPLES = 10


def _files(model: onnx.ModelProto | Path, where: Path, name: str) -> tuple[Path, Path]:
    original = model if isinstance(model, Path) else where / f"{name}.onnx"
    if not isinstance(model, Path):
        onnx.save(model, original)
    rewritten = where / f"{name}.qg.onnx"
    quantgraph.convert(original).save(rewritten)
    return original, rewritten


def _inputs(where: Path, name: str) -> list[Path]:
    found = []
    for index, sample in enumerate(detector.samples(SAMPLES)):
        path = where / f"{name}_{index}.npz"
        np.savez(path, images=sample["images"])
        found.append(path)
    return found


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ValidationReport]:
    where = tmp_path_factory.mktemp("partnum")
    found = {}
    for name, dims in (("cnn_u8", None), ("transformer_u8", {"batch": 2})):
        files = _files(ROOT / "models" / f"{name}.onnx", where, name)
        found[name] = validate(
            *files, fusion="onednn", intermediate=True, iterations=SAMPLES, dims=dims
        )
    for reduce_range in (False, True):
        name = "detector_7bit" if reduce_range else "detector"
        files = _files(detector.quantized(reduce_range), where, name)
        found[name] = validate(
            *files, fusion="onednn", intermediate=True, inputs=_inputs(where, name)
        )
    return found


def test_intermediate_keeps_the_plan_of_a_plain_session(
    reports: dict[str, ValidationReport],
) -> None:
    """Exposing every tensor before planning kept them all out of partitions: the tensors are
    exposed once planned, so --intermediate checks the partitions the verdict runs."""
    for name in ("cnn_u8", "transformer_u8"):
        proto = quantgraph.convert(ROOT / "models" / f"{name}.onnx").proto
        plain = quantgraph.InferenceSession(proto, fusion="onednn").fusion_plan
        plan = reports[name].fusion_plan
        assert plan is not None and plain.units
        assert [u.compute for u in plan.units] == [u.compute for u in plain.units]
        checks = reports[name].intermediate.partitions  # type: ignore[union-attr]
        assert checks is not None
        assert sorted(c.compute for c in checks) == sorted(u.compute for u in plain.units)
        assert all(not c.note and c.outputs for c in checks)


def test_a_partition_fed_the_fused_runs_own_inputs_reproduces_it() -> None:
    """The harness itself: each partition alone, fed the tensors the fused run computed for
    its inputs, gives exactly the fused run's outputs (channels-last chains included)."""
    path = ROOT / "models" / "cnn_u8.onnx"
    parts = Partitions(expose_all=True)
    session = quantgraph.InferenceSession(
        quantgraph.convert(path).proto, fusion="onednn", after_fusion=parts.after_fusion
    )
    names = [o.name for o in session.get_outputs()]
    assert set(parts.needed) <= set(names) | {"input"}
    for seed in range(3):
        sample = make_inputs(path, seed=seed)
        fused = dict(zip(names, session.run(names, sample), strict=True))
        parts.add({**sample, **fused}, fused)
    checks = parts.checks(session.fusion_plan, {})
    assert len(checks) == len(session.fusion_plan.units) == 4
    for check in checks:
        for output in check.outputs:
            assert output.introduced.mismatches == 0, (check.compute, output.name)
            assert output.introduced.elements > 0


def test_without_saturation_each_partition_introduces_at_most_a_step(
    reports: dict[str, ValidationReport],
) -> None:
    """7-bit weights saturate on no CPU: only oneDNN's rounding and order remain."""
    checks = reports["detector_7bit"].intermediate.partitions  # type: ignore[union-attr]
    assert checks is not None and len(checks) == 7
    assert all(not c.reason for c in checks)
    introduced = [c.introduced_steps for c in checks]
    assert all(s is not None and s <= PER_PARTITION for s in introduced), introduced


def test_bundled_models_and_a_detector_within_the_bound_or_saturating(
    reports: dict[str, ValidationReport],
) -> None:
    """Beyond the bound only where int8 products saturate on this CPU (no VNNI), and only in
    partitions that compute with them (a pooling partition is exact)."""
    saturates = onednn_library.int8_saturates()
    for name, report in reports.items():
        checks = report.intermediate.partitions  # type: ignore[union-attr]
        assert checks is not None
        for check in checks:
            steps = check.introduced_steps
            assert steps is not None
            if "MaxPool" in check.kernel and "Convolution" not in check.kernel:
                assert steps == 0, (name, check.compute)
            if steps > PER_PARTITION:
                assert saturates, (name, check.compute, steps)
                assert "Convolution" in check.kernel or "MatMul" in check.kernel
            if check.reason:  # the plan says it saturates only where it does
                assert saturates


def test_what_the_fused_run_shows_is_explained_by_what_partitions_introduce(
    reports: dict[str, ValidationReport],
) -> None:
    """The fused run shows at each partition at least what that partition introduces, the
    first partition that introduces a difference inherits nothing, and it is the one named."""
    for name, report in reports.items():
        found = report.intermediate
        assert found is not None and found.partitions is not None
        for check in found.partitions:
            inherited, introduced = check.inherited_steps, check.introduced_steps
            assert inherited is not None and introduced is not None
            assert inherited >= introduced, (name, check.compute)
        first = found.first_partition_divergence
        introducing = [c for c in found.partitions if c.introduces]
        if not introducing:
            assert first is None
            continue
        assert first is not None and first.node == introducing[0].node
        assert first.max_abs_diff_steps is not None and first.mismatches > 0
        upstream = found.partitions[: found.partitions.index(introducing[0])]
        assert all(c.inherited_steps == 0 for c in upstream), name


def test_text_and_json_name_the_first_partition(tmp_path: Path) -> None:
    original, rewritten = _files(detector.quantized(True), tmp_path, "detector_7bit")
    args = [str(original), str(rewritten), "--fusion", "onednn", "--intermediate"]
    samples = tmp_path / "samples"
    samples.mkdir()
    _inputs(samples, "d")
    args += ["--inputs", str(samples), "--atol", "1"]
    text = CliRunner().invoke(main, ["validate", *args])
    assert text.exit_code == 0, text.output
    assert "oneDNN partitions: 7 run alone" in text.output
    done = CliRunner().invoke(main, ["validate", *args, "--json"])
    payload = json.loads(done.output)
    jsonschema.validate(payload, schema("validate"))
    found = payload["intermediate"]
    first = found["first_partition_divergence"]
    assert first is not None
    assert f"first partition divergence: '{first['node']}'" in text.output
    named = next(p for p in found["partitions"] if p["node"] == first["node"])
    assert named["introduced_steps"] == first["max_abs_diff_steps"] >= 1
