"""Validation generates with a decoder as decoders are used (issue #40 item 3): a prompt, the
prefill, then steps feeding each model's own token and cache back; tokens and logits compared
at every step. Held to an independent greedy loop written here on plain onnxruntime sessions
(the original) and quantgraph's session (the rewritten model)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.cli.args import validation as cli_validation
from quantgraph.errors import ModelError
from quantgraph.schemas_json import schema
from quantgraph.validation.generation import greedy
from quantgraph.validation.page.html_page import render
from tests.browser import dom
from tools.decoders import TINY, DecoderConfig, decoder_proto, write_decoder

MODELS = Path(__file__).resolve().parent.parent / "models"
Run = Callable[[list[str], dict[str, np.ndarray]], Sequence[np.ndarray]]


def _dtype(config: DecoderConfig) -> type[np.floating]:
    return np.float16 if config.dtype == "float16" else np.float32


def _sample(config: DecoderConfig) -> dict[str, np.ndarray]:
    """One consistent single-run sample (3 cached positions, 4 new): the verdict's outputs."""
    rng = np.random.default_rng(1)
    feeds = {
        "input_ids": rng.integers(0, config.vocab, (1, 4)).astype(np.int64),
        "attention_mask": np.ones((1, 7), np.int64),
    }
    if config.position_ids:
        feeds["position_ids"] = np.arange(3, 7)[None, :].astype(np.int64)
    for layer in range(config.layers):
        for part in ("key", "value"):
            shape = (1, config.kv_heads, 3, config.head_size)
            feeds[f"past_key_values.{layer}.{part}"] = rng.standard_normal(shape).astype(
                _dtype(config)
            )
    return feeds


def _greedy(run: Run, config: DecoderConfig, prompt: list[int], steps: int) -> list[np.ndarray]:
    """An independent greedy loop: each step's logits (batch 1, the cache fed back)."""
    names = ["logits"] + [
        f"present.{layer}.{part}" for layer in range(config.layers) for part in ("key", "value")
    ]
    cache = {
        f"past_key_values.{layer}.{part}": np.zeros(
            (1, config.kv_heads, 0, config.head_size), _dtype(config)
        )
        for layer in range(config.layers)
        for part in ("key", "value")
    }
    tokens, past, found = list(prompt), 0, []
    for _ in range(steps + 1):
        new = tokens[past:]
        feeds = {
            "input_ids": np.array([new], np.int64),
            "attention_mask": np.ones((1, len(tokens)), np.int64),
            **cache,
        }
        if config.position_ids:
            feeds["position_ids"] = np.arange(past, len(tokens))[None, :].astype(np.int64)
        outputs = run(names, feeds)
        found.append(outputs[0])
        past = len(tokens)
        tokens.append(int(np.argmax(outputs[0][0, -1])))
        cache = {
            name.replace("present", "past_key_values"): value
            for name, value in zip(names[1:], outputs[1:], strict=True)
        }
    return found


def _original_run(model: onnx.ModelProto, fused: bool) -> Run:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if fused
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return lambda names, feeds: session.run(names, feeds)


def _scaled(model: onnx.ModelProto, name: str, factor: float) -> onnx.ModelProto:
    """``model`` with the initializer ``name`` multiplied by ``factor``."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    tensor = next(t for t in edited.graph.initializer if t.name == name)
    array = numpy_helper.to_array(tensor)
    tensor.CopyFrom(numpy_helper.from_array((array * factor).astype(array.dtype), name))
    return edited


def _tokens(logits: list[np.ndarray]) -> list[int]:
    return [int(np.argmax(step[0, -1])) for step in logits]


@pytest.mark.parametrize(
    "config",
    [TINY, TINY.replace(style="olive"), TINY.replace(dtype="float16")],
    ids=["builder", "olive-position-ids", "float16"],
)
def test_fused_generation_is_identical_at_every_step(config: DecoderConfig) -> None:
    original = decoder_proto(config)
    rewritten = quantgraph.convert(original).proto
    report = quantgraph.validate(original, rewritten, inputs=_sample(config), fusion="onnxruntime")
    found = report.generation
    assert found is not None and report.agree and found.agree
    assert found.tolerance is None  # exact, as the outputs
    assert len(found.prompt) == greedy.DEFAULT_PROMPT_TOKENS
    assert all(0 <= t < config.vocab for t in found.prompt)
    assert len(found.steps) == greedy.DEFAULT_STEPS + 1
    expected = _greedy(_original_run(original, fused=True), config, found.prompt, 8)
    actual = _greedy(
        quantgraph.InferenceSession(rewritten, "native", fusion="onnxruntime").run,
        config,
        found.prompt,
        8,
    )
    for step, want, got in zip(found.steps, expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)  # the loop here agrees with itself ...
        assert step.logits.agree and step.logits.mismatches == 0  # ... and with the report
        assert step.logits.dtype == str(np.dtype(_dtype(config)))
        assert step.logits.shape == list(want.shape)
        assert step.judged and step.agree
    assert [s.token_original for s in found.steps] == _tokens(expected)
    assert [s.token_rewritten for s in found.steps] == _tokens(actual)
    assert found.first_divergence is None and found.logits_max_abs_diff == 0.0


def test_a_corrupted_scale_parts_the_tokens_where_an_independent_loop_does() -> None:
    original = decoder_proto(TINY)
    converted = quantgraph.convert(original).proto
    broken = _scaled(converted, "model.layers.1.mlp.down_proj.MatMul.weight_scales_t", 1.5)
    report = quantgraph.validate(
        original, broken, inputs=_sample(TINY), fusion="onnxruntime", generate=16
    )
    found = report.generation
    assert found is not None and not found.agree and not report.agree
    expected = _tokens(_greedy(_original_run(original, fused=True), TINY, found.prompt, 16))
    session = quantgraph.InferenceSession(broken, "native", fusion="onnxruntime")
    actual = _tokens(_greedy(session.run, TINY, found.prompt, 16))
    parts = next(k for k, (a, b) in enumerate(zip(expected, actual, strict=True)) if a != b)
    assert [s.token_original for s in found.steps][: parts + 1] == expected[: parts + 1]
    assert [s.token_rewritten for s in found.steps][: parts + 1] == actual[: parts + 1]
    assert found.first_divergence == parts
    assert found.first_failing == 0  # the logits differ from the prefill on
    assert [s.judged for s in found.steps] == [k <= parts for k in range(17)]
    assert f"the tokens part at step {parts}" in found.verdict()


def test_accuracy_level_0_unfused_agrees_within_the_reports_tolerance() -> None:
    config = TINY.replace(accuracy_level=0)
    original = decoder_proto(config)
    rewritten = quantgraph.convert(original).proto
    report = quantgraph.validate(original, rewritten, inputs=_sample(config))
    found = report.generation
    assert found is not None and report.agree and found.agree
    assert not report.exact_expected and report.bound is not None
    assert found.tolerance == (report.bound.atol("logits"), 0.0)  # one rule: the logits' bound
    atol, rtol = found.tolerance
    expected = _greedy(_original_run(original, fused=False), config, found.prompt, 8)
    assert [s.token_original for s in found.steps] == _tokens(expected)
    assert found.first_divergence is None
    for step, want in zip(found.steps, expected, strict=True):
        assert step.logits.beyond_tolerance == 0
        assert step.logits.max_abs_diff <= atol + rtol * float(np.max(np.abs(want)))


@pytest.mark.parametrize("fusion", ["none", "onnxruntime", "auto"])
def test_each_fusion_generates(fusion: str) -> None:
    config = TINY.replace(accuracy_level=0)
    original = decoder_proto(config)
    rewritten = quantgraph.convert(original).proto
    report = quantgraph.validate(
        original, rewritten, inputs=_sample(config), fusion=fusion, generate=3
    )
    assert report.agree and report.generation is not None
    assert report.generation.same_tokens == 4


def test_the_prompt_and_steps_fit_the_models_positions() -> None:
    config = TINY.replace(max_positions=12)  # a rotary cache of 12 rows
    original = decoder_proto(config)
    rewritten = quantgraph.convert(original).proto
    report = quantgraph.validate(original, rewritten, inputs=_sample(config), fusion="onnxruntime")
    found = report.generation
    assert found is not None and found.agree
    assert len(found.prompt) == 4 and len(found.steps) == 9  # 4 + 8 positions
    assert "holds 12 positions" in found.capped
    report = quantgraph.validate(
        original, rewritten, inputs=_sample(config), fusion="onnxruntime", prompt_tokens=3
    )
    assert report.generation is not None and not report.generation.capped


def test_seeded_prompts_and_the_options_rules() -> None:
    original = decoder_proto(TINY)
    rewritten = quantgraph.convert(original).proto
    sample = _sample(TINY)
    first = quantgraph.validate(original, rewritten, inputs=sample, generate=1, seed=3)
    again = quantgraph.validate(original, rewritten, inputs=sample, generate=1, seed=3)
    other = quantgraph.validate(original, rewritten, inputs=sample, generate=1, seed=4)
    assert first.generation is not None and again.generation is not None
    assert other.generation is not None
    assert first.generation.prompt == again.generation.prompt != other.generation.prompt
    assert quantgraph.validate(original, rewritten, inputs=sample, generate=0).generation is None
    with pytest.raises(ModelError, match=r"--prompt-tokens 4 applies with --generate 1 or more"):
        quantgraph.validate(original, rewritten, inputs=sample, generate=0, prompt_tokens=4)
    cnn = MODELS / "cnn_u8.onnx"
    cnn_qg = quantgraph.convert(cnn).proto
    assert quantgraph.validate(cnn, cnn_qg).generation is None  # not a decoder: no generation
    with pytest.raises(ModelError, match=r"--generate 2: .*cnn_u8.onnx is not a decoder"):
        quantgraph.validate(cnn, cnn_qg, generate=2)


def test_the_cli_defaults_are_the_modules() -> None:
    assert cli_validation.DEFAULT_STEPS == greedy.DEFAULT_STEPS
    assert cli_validation.DEFAULT_PROMPT_TOKENS == greedy.DEFAULT_PROMPT_TOKENS


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TINY written with its weights in one external data file beside it, converted beside
    it, and a sample."""
    folder = tmp_path_factory.mktemp("generation")
    path = write_decoder(folder / "tiny.onnx", TINY)
    quantgraph.convert(path).save(folder / "tiny_qg.onnx")
    np.savez(folder / "sample.npz", allow_pickle=False, **_sample(TINY))
    return folder


def test_cli_generate_prints_the_steps_and_the_json_validates(
    written: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(written)  # the models' weights beside them (external data)
    args = ["validate", "tiny.onnx", "tiny_qg.onnx", "--inputs", "sample.npz"]
    args += ["--fusion", "onnxruntime", "--generate", "3", "--prompt-tokens", "5"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("generation: a prompt")))
    assert len([line for line in lines[start + 2 : start + 6] if "identical" in line]) == 4
    assert "generation: prefill + 3 steps, 4 of 4 choose the same token" in result.output
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("validate")).validate(payload)
    found = payload["generation"]
    assert found["prompt_tokens"] == 5 and found["steps_run"] == 4 and found["agree"]
    assert found["tokens_original"] == found["tokens_rewritten"]


def test_cli_convert_validate_generates_and_refuses_generate_without_a_decoder(
    written: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # OUT's weights beside it, here (external data)
    args = ["convert", str(written / "tiny.onnx"), "out.onnx", "--validate", "--json"]
    args += ["--inputs", str(written / "sample.npz"), "--fusion", "onnxruntime", "--generate", "2"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("convert")).validate(payload)
    assert payload["validation"]["generation"]["steps_run"] == 3
    cnn = ["convert", str(MODELS / "cnn_u8.onnx"), "cnn.onnx", "--generate", "2"]
    result = CliRunner().invoke(main, [*cnn, "--validate"])
    assert result.exit_code == 2 and "is not a decoder" in result.output
    assert not (tmp_path / "cnn.onnx").exists()  # refused before OUT is written
    result = CliRunner().invoke(main, cnn)
    assert result.exit_code == 2 and "--generate applies only with --validate" in result.output
    for option, value, rule in (("--generate", "-1", "x>=0"), ("--prompt-tokens", "0", "x>=1")):
        result = CliRunner().invoke(main, ["validate", "a.onnx", "b.onnx", option, value])
        assert result.exit_code == 2 and f"{value} is not in the range {rule}" in result.output


def test_the_page_shows_the_generation(tmp_path: Path) -> None:
    original = decoder_proto(TINY)
    converted = quantgraph.convert(original).proto
    broken = _scaled(converted, "model.layers.1.mlp.down_proj.MatMul.weight_scales_t", 1.5)
    report = quantgraph.validate(
        original, broken, inputs=_sample(TINY), fusion="onnxruntime", generate=12
    )
    found = report.generation
    assert found is not None and found.first_divergence is not None
    html = render(report, original="tiny.onnx", rewritten="broken.onnx")
    assert "<h2 id='generation'>Generation</h2>" in html
    assert escape(found.verdict()) in html
    table = html.split("<table id='generation-steps'>")[1].split("</table>")[0]
    assert table.count("<tr") == 1 + 13  # the head, then the prefill and 12 steps
    assert table.count("class='parts'") == 1
    assert table.count("not judged") == 12 - found.first_divergence
    page = report.write_html(tmp_path / "report.html")
    text, _ = dom(page)  # skipped without a headless Chromium
    assert "generation-steps" in text and "the models DISAGREE" in text


def test_a_decoder_whose_vocabulary_is_open_says_why_it_does_not_generate() -> None:
    original = decoder_proto(TINY)
    logits = next(o for o in original.graph.output if o.name == "logits")
    logits.type.tensor_type.shape.dim[-1].dim_param = "vocab_size"  # no fixed vocabulary
    rewritten = quantgraph.convert(original).proto
    report = quantgraph.validate(original, rewritten, inputs=_sample(TINY), fusion="onnxruntime")
    found = report.generation
    assert found is not None and found.steps == [] and found.agree and report.agree
    assert found.skipped is not None and "the vocabulary is unknown" in found.skipped
    assert found.verdict().startswith("generation: not run: the vocabulary is unknown")
    assert found.to_dict()["steps_run"] == 0
