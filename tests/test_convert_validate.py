"""convert --validate takes every option of validate (issue 32, item 1): the same declarations,
the same meaning (the same report as validate on the written model), the same rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner, Result

import quantgraph
from quantgraph.cli import main
from quantgraph.cli.args.validation import VALIDATION_FIELDS, VALIDATION_OPTIONS
from quantgraph.schemas_json import schema

ROOT = Path(__file__).resolve().parent.parent
SHAPE = (1, 3, 16, 16)  # cnn_u8's input


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cnn.onnx, its conversion cnn_qg.onnx, two samples a.npz and b.npz."""
    folder = tmp_path_factory.mktemp("convert_validate")
    shutil.copy(ROOT / "models" / "cnn_u8.onnx", folder / "cnn.onnx")
    quantgraph.convert(folder / "cnn.onnx").save(folder / "cnn_qg.onnx")
    rng = np.random.default_rng(3)
    for name in ("a", "b"):
        np.savez(folder / f"{name}.npz", input=rng.standard_normal(SHAPE).astype(np.float32))
    return folder


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _options(name: str) -> dict[str, click.Option]:
    command = main.commands[name]
    return {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}


def test_convert_takes_every_option_validate_takes() -> None:
    """Every validate option but the ones about validate's own output (--force names the file
    it replaces) is convert's too, declared once (the same option, help and all)."""
    validate, convert = _options("validate"), _options("convert")
    own = {"--force", "--json", "--help"}
    shared = set(validate) - own
    assert shared <= set(convert), sorted(shared - set(convert))
    for flag in shared - {"--report"}:  # --report says that convert needs --validate
        assert validate[flag].help == convert[flag].help, flag
        assert validate[flag].name == convert[flag].name, flag

    @VALIDATION_OPTIONS
    def probe(**_: object) -> None:
        """The shared stack's parameters."""

    declared = {p.name for p in getattr(probe, "__click_params__", [])}
    assert declared == set(VALIDATION_FIELDS)
    assert {o.name for o in validate.values()} - {"force", "as_json", "help", "report_path"} == (
        declared
    )


@pytest.mark.parametrize(
    "options",
    [
        ["--inputs", "{a}", "--inputs", "{b}", "--intermediate", "--optimized", "--atol", "1"],
        ["--iterations", "2", "--seed", "7", "--arithmetic", "onednn", "--rtol", "0.5"],
        ["--fusion", "onnxruntime", "--backend", "python"],
    ],
    ids=["inputs-intermediate-optimized", "generated-tolerance", "fusion-python"],
)
def test_convert_validate_reports_what_validate_reports(work: Path, options: list[str]) -> None:
    """The same options give convert --validate's JSON the report validate gives on the
    written model, field for field (inputs from files, intermediate, optimized, tolerances,
    fusion), valid under both schemas."""
    given = [o.format(a=work / "a.npz", b=work / "b.npz") for o in options]
    converted = invoke("convert", work / "cnn.onnx", "--dry-run", "--validate", *given, "--json")
    assert converted.exit_code == 0, converted.output
    payload = json.loads(converted.stdout)
    jsonschema.Draft202012Validator(schema("convert")).validate(payload)
    alone = invoke("validate", work / "cnn.onnx", work / "cnn_qg.onnx", *given, "--json")
    assert alone.exit_code == 0, alone.output
    report = json.loads(alone.stdout)
    assert payload["validation"] == report
    if "--inputs" in options:
        assert report["samples"] == 2 and report["seed"] is None
        assert report["intermediate"]["tensors_compared"] > 0
        assert report["optimized"]["atol"] == 1
    if "--fusion" in options:
        assert report["fusion"] == "onnxruntime" and report["fusion_plan"]["units"]


def test_convert_validate_keeps_validates_input_rules(work: Path, tmp_path: Path) -> None:
    """Generation options with --inputs are refused as validate refuses them, and a sample
    that does not fit the model is refused before OUT is written."""
    out = tmp_path / "o.onnx"
    sample = work / "a.npz"
    base: list[str | Path] = ["convert", work / "cnn.onnx", out, "--validate", "--inputs", sample]
    mixed = invoke(*base, "--seed", "3", "--dim", "a=1")
    assert mixed.exit_code == 2, mixed.output
    assert mixed.stderr.strip().splitlines()[-1] == (
        "Error: --seed, --dim apply only to generated inputs, not with --inputs"
    )
    np.savez(tmp_path / "bad.npz", input=np.ones((1, 3, 8, 8), np.float32))
    bad = invoke("convert", work / "cnn.onnx", out, "--validate", "--inputs", tmp_path / "bad.npz")
    assert bad.exit_code == 2, bad.output
    assert bad.stderr.strip().endswith(
        "input 'input' is float32[1,3,8,8]; the model expects float32[1,3,16,16] "
        "(dim 2 is 8, not 16)"
    ), bad.stderr
    sides: list[list[str | Path]] = [
        ["convert", work / "cnn.onnx", out, "--validate"],
        ["validate", work / "cnn.onnx", work / "cnn_qg.onnx"],
    ]
    for args in sides:
        refused = invoke(*args, "--rtol", "0.5")  # a tolerance that would judge nothing
        assert refused.exit_code == 2 and "would judge nothing" in refused.stderr, refused.output
    assert not out.exists()


def test_out_never_replaces_an_inputs_file(work: Path, tmp_path: Path) -> None:
    sample = tmp_path / "s.npz"
    shutil.copy(work / "a.npz", sample)
    before = sample.read_bytes()
    result = invoke(
        "convert", work / "cnn.onnx", sample, "--validate", "--inputs", sample, "--force"
    )
    assert result.exit_code == 2, result.output
    assert sample.read_bytes() == before
