"""quantgraph fallback on the command line: OUT, exit codes, --json against its schema, the
page with its Pareto charts; Ray gives what local workers give."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import onnx
import pytest
from click.testing import CliRunner

from quantgraph.cli.app import main
from quantgraph.schemas_json import schema
from tests.fallback.models import aliased_mlp, qdq, samples


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fallback")
    floating = aliased_mlp()
    onnx.save(floating, folder / "float.onnx")
    onnx.save(qdq(floating, samples(scale=0.2)), folder / "qdq.onnx")
    return folder / "float.onnx", folder / "qdq.onnx"


def _run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout


def test_fallback_writes_out_and_the_json_validates(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    floating, quantized = models
    out, page = tmp_path / "mixed.onnx", tmp_path / "front.html"
    code, text = _run("fallback", floating, quantized, out, "--target-sqnr", "7", "--json",
                      "--report", page, "--workers", "1")  # fmt: skip
    assert code == 0
    payload = json.loads(text)
    jsonschema.Draft202012Validator(schema("fallback")).validate(payload)
    assert payload["reached"] and [c["name"] for c in payload["kept"]] == ["x"]
    assert all(p["ms"] is not None for p in payload["points"])
    kept = onnx.load(out)
    assert not any(n.op_type == "QuantizeLinear" and n.input[0] == "x" for n in kept.graph.node)
    html = page.read_text()
    assert "quality against latency" in html and html.count("<circle") >= 2 * len(payload["points"])


def test_an_unreached_target_exits_1_and_says_so(models: tuple[Path, Path], tmp_path: Path) -> None:
    floating, quantized = models
    code, text = _run("fallback", floating, quantized, tmp_path / "o.onnx", "--target-sqnr",
                      "1000", "--no-price", "--max-evaluations", "3", "--workers", "1")  # fmt: skip
    assert code == 1
    assert "NOT reached in 3 evaluations" in text
    assert (tmp_path / "o.onnx").exists()


def test_out_is_never_an_input(models: tuple[Path, Path]) -> None:
    floating, quantized = models
    before = quantized.read_bytes()
    code, _ = _run("fallback", floating, quantized, quantized, "--target-sqnr", "7", "--force")
    assert code == 2
    assert quantized.read_bytes() == before


def test_ray_finds_what_local_workers_find(models: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (quantgraph[ray])")
    from quantgraph import fallback

    floating, quantized = models
    data = samples(8, seed=3)
    local = fallback(floating, quantized, target=30.0, data=data, workers=2, price=False)
    on_ray = fallback(floating, quantized, target=30.0, data=data, ray_address="local",
                      price=False)  # fmt: skip
    assert on_ray.runner.startswith("Ray at local")
    assert [(p.kept, p.quality) for p in on_ray.points] == [
        (p.kept, p.quality) for p in local.points
    ]


def test_models_with_external_data_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both models' weights in data files beside them, the command run elsewhere, worker
    processes: the same kept set as in memory, the weights a float fallback takes read from the
    float model's data file."""
    folder = tmp_path / "models"
    folder.mkdir()
    floating = aliased_mlp()
    quantized = qdq(floating, samples(scale=0.2))
    for model, name in ((floating, "float"), (quantized, "qdq")):
        onnx.save(model, folder / f"{name}.onnx", save_as_external_data=True,
                  location=f"{name}.data", size_threshold=0)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "mixed.onnx"
    code, text = _run("fallback", folder / "float.onnx", folder / "qdq.onnx", out,
                      "--target-sqnr", "7", "--json", "--no-price", "--workers", "2")  # fmt: skip
    assert code == 0, text
    payload = json.loads(text)
    assert payload["reached"] and [c["name"] for c in payload["kept"]] == ["x"]
    from quantgraph import fallback

    paths = [folder / "float.onnx", folder / "qdq.onnx"]
    direct = fallback(*paths, target=7.0, data=samples(8, seed=3), price=False, workers=2)
    assert direct.search.kept == {"x"}
