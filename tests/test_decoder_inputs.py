"""A decoder's generated inputs are consistent (issue 40, item 3, the input half): a prefill (no
past, N new tokens) and a decode step (past P, 1 new token), each named in the report; an
attention mask of ones over past + new, position_ids P .. P + N - 1, token ids inside the
vocabulary, past + new within the rotary cache. Before: past_key_values.* at 224 positions
("image default 224"), attention_mask one position long and drawn from [-100, 100], and
GroupQueryAttention refused ("total_sequence_length must be at least kv_sequence_length")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.ir.model_files import load_model
from quantgraph.schemas_json import schema
from quantgraph.validation import generate
from quantgraph.validation.inputs import memory
from quantgraph.validation.inputs.decoder import decoder_signature
from quantgraph.validation.inputs.plan import Case, draw, plan_cases
from tests.test_decoder_forms import CASES
from tools.decoders import TINY, DecoderConfig, decoder_proto


def _pair(folder: Path, config: DecoderConfig) -> tuple[Path, Path]:
    original, rewritten = folder / "decoder.onnx", folder / "decoder_qg.onnx"
    onnx.save(decoder_proto(config), original)
    quantgraph.convert(original).save(rewritten)
    return original, rewritten


def _check_case(case: Case, config: DecoderConfig, past: int, new: int) -> None:
    """The sizes and values one step of generation feeds."""
    specs = {spec.name: spec for spec in case.specs}
    feeds = draw(case.specs, 0)
    tokens = "token" if new == 1 else "tokens"
    assert case.name.endswith(f"(past {past}, {new} new {tokens})")
    assert feeds["input_ids"].shape == (1, new)
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < config.vocab
    assert (specs["input_ids"].low, specs["input_ids"].high) == (0, config.vocab - 1)
    assert feeds["attention_mask"].shape == (1, past + new)
    assert (feeds["attention_mask"] == 1).all()
    if config.position_ids:
        np.testing.assert_array_equal(feeds["position_ids"], [np.arange(past, past + new)])
    else:
        assert "position_ids" not in feeds
    dtype = np.float16 if config.dtype == "float16" else np.float32
    for layer in range(config.layers):
        for part in ("key", "value"):
            cache = feeds[f"past_key_values.{layer}.{part}"]
            assert cache.shape == (1, config.kv_heads, past, config.head_size)
            assert cache.dtype == dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_prefill_and_decode_step_are_consistent_and_run(name: str) -> None:
    """Every form of tools/decoders.py: the original and its conversion plan alike, and
    onnxruntime runs the original on both steps (GroupQueryAttention takes them)."""
    config = CASES[name]
    proto = decoder_proto(config)
    model = ir.from_proto(proto)
    cases = plan_cases(model)
    most = config.max_positions if config.rotary else None
    new = 128 if most is None else min(128, most - 1)
    assert [c.name.split(" (")[0] for c in cases] == ["prefill", "decode step"]
    _check_case(cases[0], config, 0, new)
    _check_case(cases[1], config, new, 1)
    converted = plan_cases(quantgraph.convert(proto).model)
    assert [c.name for c in converted] == [c.name for c in cases]
    for ours, theirs in zip(converted, cases, strict=True):  # the whys name their own nodes
        for name, array in draw(ours.specs, 5).items():
            np.testing.assert_array_equal(array, draw(theirs.specs, 5)[name])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options)
    for case in cases:
        feeds = draw(case.specs, 0)
        logits, *presents = session.run(None, feeds)
        past, new_tokens = feeds["past_key_values.0.key"].shape[2], feeds["input_ids"].shape[1]
        assert logits.shape == (1, new_tokens, config.vocab) and np.isfinite(logits).all()
        assert all(p.shape[2] == past + new_tokens for p in presents)


def test_dims_bind_the_prefill_and_the_past_and_the_rotary_cache_caps_them() -> None:
    model = ir.from_proto(decoder_proto(TINY))
    prefill, step = plan_cases(model, dims={"sequence_length": 16, "past_sequence_length": 40})
    _check_case(prefill, TINY, 0, 16)
    _check_case(step, TINY, 40, 1)
    assert step.specs[2].shape_from[2] == "decode step: past 40 (--dim past_sequence_length=40)"
    short = TINY.replace(max_positions=64)
    prefill, step = plan_cases(ir.from_proto(decoder_proto(short)))
    signature = decoder_signature(ir.from_proto(decoder_proto(short)))
    assert signature is not None and signature.max_positions == 64
    _check_case(prefill, short, 0, 63)
    _check_case(step, short, 63, 1)
    assert "at most 63: 64 positions" in prefill.specs[0].shape_from[1]


def test_validate_names_both_steps_and_the_json_has_each_case(tmp_path: Path) -> None:
    original, rewritten = _pair(tmp_path, TINY.replace(style="olive"))
    args = ["validate", str(original), str(rewritten), "--dim", "sequence_length=8"]
    result = CliRunner().invoke(main, [*args, "--json", "--iterations", "2"])
    assert result.exit_code in (0, 1), result.stderr  # the verdict is the comparison's
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("validate")).validate(payload)
    assert payload["samples"] == 4
    assert payload["sample_names"] == [
        "prefill (past 0, 8 new tokens), seed 0",
        "prefill (past 0, 8 new tokens), seed 1",
        "decode step (past 8, 1 new token), seed 0",
        "decode step (past 8, 1 new token), seed 1",
    ]
    cases = payload["cases"]
    assert list(cases) == ["prefill (past 0, 8 new tokens)", "decode step (past 8, 1 new token)"]
    assert payload["inputs"] == cases["prefill (past 0, 8 new tokens)"]
    step = cases["decode step (past 8, 1 new token)"]
    assert step["attention_mask"]["shape"] == [1, 9] and step["attention_mask"]["range"] == [1, 1]
    assert step["position_ids"]["range"] == [8, 8]
    assert step["past_key_values.0.key"]["shape"] == [1, 2, 8, 16]
    text = CliRunner().invoke(main, args)
    assert "inputs: 2 samples: prefill (past 0, 8 new tokens), seed 0; decode step" in text.stdout
    assert "  decode step (past 8, 1 new token):\n    input_ids: int64[1x1]" in text.stdout
    report = quantgraph.validate(original, rewritten, dims={"sequence_length": 8})
    assert report.cases is not None and len(report.sample_names) == 2
    page = report.write_html(tmp_path / "report.html").read_text()
    assert "decode step (past 8, 1 new token): input_ids" in page


def test_validate_tells_a_cache_alike_in_all_but_its_numbers_once(tmp_path: Path) -> None:
    """The text names each group of KV-cache inputs once, with what --json says of every one of
    them; every output keeps its own comparison line, and --json lists every input."""
    config = TINY.replace(layers=3)
    original, rewritten = _pair(tmp_path, config)
    args = ["validate", str(original), str(rewritten), "--dim", "sequence_length=8"]
    payload = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    text = CliRunner().invoke(main, args).stdout
    cache = [f"past_key_values.{n}.{part}" for n in range(3) for part in ("key", "value")]
    assert "past_key_values.1" not in text
    assert "  defaulted: input_ids:0 = 1 (default 1), attention_mask:0 = 1 (default 1),\n" in text
    assert "  past_key_values.*.{key,value}:0 = 1 (default 1) (6 inputs)\n" in text
    for case, inputs in payload["cases"].items():
        assert all(name in inputs for name in cache)  # --json: every input
        first = inputs[cache[0]]
        assert all(
            inputs[name]["shape"] == first["shape"] and inputs[name]["why"] == first["why"]
            for name in cache
        )
        shape = "x".join(map(str, first["shape"]))
        line = f"{first['dtype']}[{shape}] ({first['why']}) (6 inputs)"
        block = text[text.index(f"  {case}:\n") :]
        assert f"\n    past_key_values.*.{{key,value}}: {line}\n      sizes: " in block
    for output in payload["outputs"]:  # the verdict: one line per output, as before
        assert f"\n  {output['name']}: " in text
    assert len([o for o in payload["outputs"] if o["name"].startswith("present.")]) == 6


def test_the_converted_decoder_is_estimated_as_the_original_plus_a_float_weight(
    tmp_path: Path,
) -> None:
    """The memory estimate of the converted decoder exceeds the original's by at most a
    dequantized weight alive at a time (its KV-cache outputs, of sizes inference cannot tell,
    are not counted as weights: they were, 1.8x the original's at the decode step here and 6x
    at a 3.8B decoder's prefill)."""
    original, rewritten = _pair(tmp_path, TINY)
    loaded, converted = load_model(original), load_model(rewritten)
    float_weights = [
        math.prod(node.outputs[0].shape.numpy()) * 4  # type: ignore[union-attr]
        for node in converted.graph
        if node.op_type == "DynamicDequantize"
    ]
    for case in generate(loaded).cases:
        planned = {spec.name: tuple(spec.shape) for spec in case.specs}
        before = memory.estimate(loaded, planned)
        after = memory.estimate(converted, planned)
        assert after.weights == before.weights
        assert before.total <= after.total
        assert after.total <= before.total + memory.SCRATCH_FACTOR * max(float_weights)


def test_a_budget_error_tells_the_cache_once(tmp_path: Path) -> None:
    """Over --memory-budget, the one-line error names the KV-cache inputs as one item."""
    _, rewritten = _pair(tmp_path, TINY.replace(layers=3))
    result = CliRunner().invoke(main, ["run", str(rewritten), "--memory-budget", "1KiB"])
    assert result.exit_code == 2
    assert "past_key_values.*.{key,value}: float32[" in result.stderr
    assert "(6 inputs)" in result.stderr
    assert "past_key_values.1" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_inputs_file_without_part_of_the_cache_tells_it_once(tmp_path: Path) -> None:
    """Feeds of a decoder of fewer layers: the missing KV-cache inputs, the file's and the
    model's, each said as one item, on one line."""
    _, rewritten = _pair(tmp_path, TINY.replace(layers=3))
    cache = {
        f"past_key_values.{n}.{p}": np.zeros((1, 2, 0, 16), np.float32)
        for n in range(2)
        for p in ("key", "value")
    }
    tokens = np.ones((1, 4), np.int64)
    arrays: dict[str, np.ndarray] = {"input_ids": tokens, "attention_mask": tokens, **cache}
    np.savez(tmp_path / "feeds.npz", allow_pickle=False, **arrays)
    result = CliRunner().invoke(
        main, ["run", str(rewritten), "--inputs", str(tmp_path / "feeds.npz")]
    )
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no array for input 'past_key_values.2.key', 'past_key_values.2.value'" in line
    assert (
        "the file holds input_ids, attention_mask, past_key_values.*.{key,value} (4 inputs)" in line
    )
    assert "past_key_values.*.{key,value}: float32[" in line and "(6 inputs))" in line


def test_run_and_tune_feed_the_prefill_validate_plans(tmp_path: Path) -> None:
    original, rewritten = _pair(tmp_path, TINY)
    validated = generate(load_model(original))
    assert validated.names == [
        "prefill (past 0, 128 new tokens), seed 0",
        "decode step (past 128, 1 new token), seed 0",
    ]
    for command in (["run", rewritten], ["run", original]):
        result = CliRunner().invoke(main, [*map(str, command), "--json"])
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["inputs"] == validated.inputs
