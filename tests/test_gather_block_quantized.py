"""com.microsoft GatherBlockQuantized (issue #34): the embedding tables MatMulNBitsQuantizer
writes with op_types_to_quantize including "Gather" (int4/uint4 data) and Olive's RTN writes
(uint8 data packing 4 or 8 bits). Each converts to Gathers of the quantized rows and a
per_group DynamicDequantize of those rows, computes what onnxruntime computes for the original
at ORT_DISABLE_ALL and ORT_ENABLE_ALL bit for bit, and lowers back to the same node with the
same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import quantgraph
from quantgraph.cli import main
from quantgraph.testing import ort_session, quiet_session_options
from tests import published
from tests.builders import requires_native
from tests.lowering import assert_lowers_to_the_original, initializer_bytes

pytestmark = requires_native

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]
# token ids of a [2, 4] batch: first, last and negative rows, a repeated one
IDS = {"ids": np.array([[0, 3, 39, 7], [-1, 2, 2, -40]], np.int64)}


def _original(model: onnx.ModelProto, feeds: dict[str, np.ndarray], level: object) -> np.ndarray:
    options = quiet_session_options()
    options.graph_optimization_level = level
    return np.asarray(ort_session(model, options).run(None, feeds)[0])


def _converted(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(quantgraph.InferenceSession(model, "native").run(None, feeds)[0])


def _with_embedding_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """published.embedding's Gather output ("e", the table rows) as the first output too."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    exposed.graph.output.insert(0, helper.make_tensor_value_info("e", TensorProto.FLOAT, None))
    return exposed


QUANTIZER = [(64, 16, False), (56, 16, True), (128, 32, False), (256, 128, True)]


@pytest.mark.parametrize(
    ("k", "block", "symmetric"),
    QUANTIZER,
    ids=[f"k{k}-b{b}-{'sym' if s else 'asym'}" for k, b, s in QUANTIZER],
)
def test_quantizer_tables_convert_exactly_and_lower_back(
    k: int, block: int, symmetric: bool
) -> None:
    """MatMulNBitsQuantizer(gather): int4 (symmetric) or uint4 + uint4 zero points, quantized
    along the row (quantize_axis 1); K = 56 with blocks of 16 is a short last block."""
    original = published.quantizer_nbits(k, block, symmetric, gather=True)
    assert [n.op_type for n in original.graph.node] == ["GatherBlockQuantized", "MatMulNBits"]
    result = quantgraph.convert(original)
    assert result.report.converted == {"GatherBlockQuantized": 1, "MatMulNBits": 1}
    assert result.report.skipped == [] and result.report.other_quantized == []
    kinds = [n.op_type for n in result.proto.graph.node]
    assert "GatherBlockQuantized" not in kinds and kinds.count("Gather") == 2 + (not symmetric)
    (detail,) = [n.detail for n in result.report.converted_nodes if n.op_type.startswith("Gather")]
    assert detail.startswith(f"{'s' if symmetric else 'u'}4 rows gathered, then per_group")
    ids = {"ids": np.random.default_rng(k).integers(-50, 50, (3, 5))}
    exposed, rewritten = _with_embedding_output(original), _with_embedding_output(result.proto)
    for level in LEVELS:  # the embedding rows bit for bit
        np.testing.assert_array_equal(_converted(rewritten, ids), _original(exposed, ids, level))
    report = quantgraph.validate(original, result.proto, backend="native", dims={"batch": 2})
    assert report.agree, report.to_dict()
    assert_lowers_to_the_original(original, result.proto)


ROWS = [
    {},  # Olive's RTN: uint8 packing 4 bits, no zero points (2^(bits-1) = 8)
    {"zero_points": True},
    {"bits": 8},
    {"bits": 8, "zero_points": True},
    {"data": "uint4"},  # no zero points: 0
    {"data": "int4", "zero_points": True},  # int4 zero points: signed zps
    {"data": "uint4", "zero_points": True, "k": 56},  # short last block
    {"zero_points": True, "k": 48, "block": 32},
    {"zero_points": True, "dtype": TensorProto.FLOAT16},
    {"k": 128, "block": 128},
    {"data": "uint4", "gather_axis": 1, "quantize_axis": 0, "k": 32},  # columns, blocks of rows
]


@pytest.mark.parametrize("rows", ROWS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
def test_hand_built_rows(rows: dict[str, object]) -> None:
    original = published.gather_block_quantized(**rows)  # type: ignore[arg-type]
    result = quantgraph.convert(original)
    assert result.report.converted == {"GatherBlockQuantized": 1}, result.report.to_dict()
    ids = IDS
    if rows.get("gather_axis") == 1:  # indices into the 32 columns
        ids = {"ids": np.array([[0, 31, -1, 5]], np.int64)}
    got = _converted(result.proto, ids)
    for level in LEVELS:
        want = _original(original, ids, level)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert_lowers_to_the_original(original, result.proto)


def test_the_whole_table_is_never_dequantized() -> None:
    """Only gathered rows reach the DynamicDequantize: its src is the Gather's [batch, seq, K]."""
    converted = quantgraph.convert(published.gather_block_quantized(vocab=1000)).proto
    (dequantize,) = [n for n in converted.graph.node if n.op_type == "DynamicDequantize"]
    producers = {o: n.op_type for n in converted.graph.node for o in n.output}
    assert [producers[name] for name in dequantize.input] == ["Gather", "Gather"]


def test_refused_gather_axis_stays_with_its_code() -> None:
    original = published.gather_block_quantized(data="uint4", quantize_axis=0, k=32)
    result = quantgraph.convert(original)
    assert [(s.node, s.code) for s in result.report.skipped] == [("embed", "gather-axis")]
    assert [n.op_type for n in result.proto.graph.node] == ["GatherBlockQuantized"]
    np.testing.assert_array_equal(
        _converted(result.proto, IDS), _original(original, IDS, LEVELS[0])
    )


@pytest.mark.filterwarnings("ignore:fusion 'onnxruntime' formed no unit")
def test_fusion_onnxruntime_equals_the_original_at_enable_all_and_says_the_dequantize_stays() -> (
    None
):
    """onnxruntime 1.32 does not fuse Gather -> DequantizeLinear back into GatherBlockQuantized:
    the plan leaves that DynamicDequantize on the session's backend and says so. The outputs
    equal the original's at ORT_ENABLE_ALL bit for bit."""
    original = published.quantizer_nbits(64, 16, False, gather=True)
    converted = quantgraph.convert(original).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    ids = {"ids": np.random.default_rng(1).integers(0, 50, (2, 6))}
    np.testing.assert_array_equal(session.run(None, ids)[0], _original(original, ids, LEVELS[1]))
    alone = [a for a in session.fusion_plan.alone if a.op_type == "DynamicDequantize"]
    assert len(alone) == 1 and "keeps this DequantizeLinear as it is" in alone[0].reason


def test_lower_to_qdq_keeps_gather_then_dequantize() -> None:
    original = published.quantizer_nbits(56, 16, False, gather=True)
    lowered = quantgraph.lower(quantgraph.convert(original).proto, to_qdq=True).proto
    kinds = [n.op_type for n in lowered.graph.node]
    assert kinds[:5] == ["Gather", "Gather", "Gather", "DequantizeLinear", "Slice"]
    ids = {"ids": np.random.default_rng(2).integers(0, 50, (2, 3))}
    exposed, qdq = _with_embedding_output(original), _with_embedding_output(lowered)
    for level in LEVELS:
        np.testing.assert_array_equal(_original(qdq, ids, level), _original(exposed, ids, level))


def test_cli_convert_validate_lower_on_an_embedding(tmp_path: Path) -> None:
    source, converted, lowered = tmp_path / "e.onnx", tmp_path / "c.onnx", tmp_path / "l.onnx"
    original = published.quantizer_nbits(64, 32, True, gather=True)
    onnx.save(original, source)
    runner = CliRunner()
    done = runner.invoke(main, ["convert", str(source), str(converted), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["converted"] == {"GatherBlockQuantized": 1, "MatMulNBits": 1}
    checked = runner.invoke(
        main, ["validate", str(source), str(converted), "--backend", "native", "--dim", "batch=2"]
    )
    assert checked.exit_code == 0, checked.output
    back = runner.invoke(main, ["lower", str(converted), str(lowered), "--json"])
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["emitted"] == {"GatherBlockQuantized": 1, "MatMulNBits": 1}
    assert initializer_bytes(onnx.load(lowered)) == initializer_bytes(original)


def test_it_is_converted_not_listed_as_another_format() -> None:
    report = quantgraph.convert(published.gather_block_quantized()).report
    assert report.other_quantized == [] and report.converted == {"GatherBlockQuantized": 1}


def test_an_index_out_of_the_table_is_an_error_where_the_original_gives_zeros() -> None:
    original = published.gather_block_quantized(vocab=40)
    converted = quantgraph.convert(original).proto
    ids = {"ids": np.array([[40]], np.int64)}
    assert not _original(original, ids, LEVELS[0]).any()
    with pytest.raises(Exception, match="out of data bounds"):
        _converted(converted, ids)
