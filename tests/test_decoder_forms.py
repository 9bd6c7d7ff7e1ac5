"""Int4 decoders as onnxruntime-genai's builder and Olive write them (tools/decoders.py): they
convert with no node left behind, run fused identical to onnxruntime on the original (a prefill
and a decode step), lower back with the original's weights byte for byte, and the checker holds
the result no more strictly than the original (issue #40 item 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import quantgraph
from quantgraph.errors import ModelError
from quantgraph.validation.inputs.decoder import decoder_signature
from tools.decoders import TINY, DecoderConfig, decoder_proto, write_decoder

# The cases: GQA with kv_heads < heads and = heads, rotary on and off, blocks 32/128
# with and without zero points, accuracy_level 0 and 4, float16, tied embeddings through
# GatherBlockQuantized, Olive's form with position_ids.
CASES = {
    "builder": TINY,
    "kv-equals-heads": TINY.replace(kv_heads=4),
    "no-rotary": TINY.replace(rotary=False),
    "block128-zero-points": TINY.replace(
        hidden=256, intermediate=384, block_size=128, zero_points=True
    ),
    "accuracy-0": TINY.replace(accuracy_level=0),
    "float16": TINY.replace(dtype="float16"),
    "tied": TINY.replace(tied_embeddings=True, zero_points=True),
    "olive": TINY.replace(style="olive"),
    "olive-no-rotary": TINY.replace(style="olive", rotary=False),
}


def _options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return options


def _feeds(config: DecoderConfig, past: int, new: int, batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(past * 10 + new)
    dtype = np.float16 if config.dtype == "float16" else np.float32
    feeds = {
        "input_ids": rng.integers(0, config.vocab, (batch, new)).astype(np.int64),
        "attention_mask": np.ones((batch, past + new), np.int64),
    }
    if config.position_ids:
        feeds["position_ids"] = np.tile(np.arange(past, past + new), (batch, 1)).astype(np.int64)
    for layer in range(config.layers):
        for part in ("key", "value"):
            shape = (batch, config.kv_heads, past, config.head_size)
            feeds[f"past_key_values.{layer}.{part}"] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _values(model: onnx.ModelProto, folder: Path | None = None) -> dict[str, tuple[int, bytes]]:
    if folder is not None:
        onnx.load_external_data_for_model(model, str(folder))
    return {
        t.name: (t.data_type, numpy_helper.to_array(t).tobytes()) for t in model.graph.initializer
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_decoder_converts_runs_fused_identical_and_lowers_back(case: str) -> None:
    config = CASES[case]
    original = decoder_proto(config)
    result = quantgraph.convert(original)
    assert not result.report.skipped, result.report.skipped
    assert (
        result.report.converted["MatMulNBits"]
        == config.layers * (5 if config.style == "builder" else 7) + 1
    )
    assert result.report.unchecked == {"SimplifiedLayerNormalization": 1}
    reference = ort.InferenceSession(
        original.SerializeToString(), _options(), providers=["CPUExecutionProvider"]
    )
    fused = quantgraph.InferenceSession(result.model, "native", fusion="onnxruntime")
    for past, new, batch in ((0, 5, 2), (6, 1, 2)):  # a prefill and a decode step
        feeds = _feeds(config, past, new, batch)
        for expected, got in zip(reference.run(None, feeds), fused.run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, expected)
    lowered = quantgraph.lower(result.model)
    back = lowered.proto
    assert _values(back) == _values(original)
    assert [(n.op_type, n.domain or "") for n in back.graph.node] == [
        (n.op_type, n.domain or "") for n in original.graph.node
    ]


def test_written_decoder_streams_the_same_weights(tmp_path: Path) -> None:
    config = TINY.replace(zero_points=True, tied_embeddings=True)
    path = write_decoder(tmp_path / "model.onnx", config, seed=3)
    on_disk = onnx.load(str(path), load_external_data=False)
    assert all(
        t.data_location == onnx.TensorProto.EXTERNAL
        for t in on_disk.graph.initializer
        if t.name.startswith("model.")
    )
    assert _values(on_disk, tmp_path) == _values(decoder_proto(config, seed=3))
    assert config.weight_bytes() == sum(
        len(numpy_helper.to_array(t).tobytes())
        for t in decoder_proto(config).graph.initializer
        if t.name not in ("one_axis", "one_i64")
    )


def test_written_decoder_converts_and_lowers_with_external_data(tmp_path: Path) -> None:
    path = write_decoder(tmp_path / "model.onnx", TINY)
    result = quantgraph.convert(path)
    assert result.report.unchecked == {"SimplifiedLayerNormalization": 1}
    converted = result.save(tmp_path / "model_qg.onnx")  # checked on disk, beside its data
    back = quantgraph.lower(converted).save(tmp_path / "back.onnx")
    assert _values(onnx.load(str(back))) == _values(onnx.load(str(path)))


def test_decoder_signature_reads_the_builder_and_olive_forms() -> None:
    for case, config in CASES.items():
        found = decoder_signature(ir.from_proto(decoder_proto(config)))
        assert found is not None, case
        assert found.vocab == config.vocab
        assert found.position_ids == ("position_ids" if config.position_ids else None)
        assert len(found.cache) == 2 * config.layers
        assert {(p.kv_heads, p.head_size) for p in found.cache} == {
            (config.kv_heads, config.head_size)
        }
        assert found.max_positions == (config.max_positions if config.rotary else None)
    assert decoder_signature(ir.from_proto(onnx.load("models/cnn_u8.onnx"))) is None


def test_an_op_neither_onnx_nor_onnxruntime_knows_is_still_refused() -> None:
    model = decoder_proto(TINY)
    for node in model.graph.node:
        if node.op_type == "SimplifiedLayerNormalization":
            node.op_type = "MadeUpNormalization"
    with pytest.raises(ModelError, match=r"input model fails onnx.checker.*MadeUpNormalization"):
        quantgraph.convert(model)
