"""Fusion with onnxruntime's kernels (issue #23): the plan, and exactness against the original.

With ``fusion="onnxruntime"`` a rewritten model must compute what the original QDQ model
computes at ORT_ENABLE_ALL, bit for bit: onnxruntime's own run of the original is the
reference, on the bundled models, on quantize_static models (u8/s8, per-tensor and
per-channel; CNN, transformer, LSTM, If, function, Loop, Scan) and on MatMulNBitsQuantizer's
int4/uint4 models. The plan is checked for what it says: each unit's kernel, and for each spec
op left alone, why.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import BackendError
from quantgraph.reference.compare import compare
from quantgraph.spec import DOMAIN
from quantgraph.testing import ort_session, quiet_session_options
from quantgraph.validation import make_inputs
from tests import producers
from tests import test_real_models as real
from tests import test_weight_only as weight_only
from tests.builders import requires_native

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = [f"{arch}_{act}" for arch in ("cnn", "transformer", "if_branch") for act in ("u8", "s8")]

pytestmark = requires_native


def _original(
    model: onnx.ModelProto | Path, level: ort.GraphOptimizationLevel
) -> ort.InferenceSession:
    return ort_session(model, _options(level))


def _assert_same(expected: list[np.ndarray], actual: list[np.ndarray]) -> None:
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        result = compare(str(index), want, got)
        assert result.agree, result


def _fused(model: object, backend: str = "native") -> quantgraph.InferenceSession:
    return quantgraph.InferenceSession(model, backend, fusion="onnxruntime")  # type: ignore[arg-type]


# -- exact against the original at ORT_ENABLE_ALL ---------------------------------------------


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_models_equal_the_original_at_enable_all(name: str) -> None:
    path = ROOT / "models" / f"{name}.onnx"
    session = _fused(quantgraph.convert(path).proto)
    original = _original(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    for seed in range(3):
        dims = {"batch": 2} if name.startswith("transformer") else None
        feeds = make_inputs(path, seed=seed, dims=dims)
        _assert_same(original.run(None, feeds), session.run(None, feeds))
    assert session.fusion_plan.units or name.startswith("if_branch")


@pytest.mark.parametrize("case", real.CASES)
def test_quantize_static_models_equal_the_original_at_enable_all(case: str) -> None:
    model = real.quantized(case)
    session = _fused(real.converted(case, False).proto)
    original = _original(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    for feeds in real.feeds(case):
        _assert_same(original.run(None, feeds), session.run(None, feeds))


@pytest.mark.parametrize(("symmetric", "block"), weight_only.CASES, ids=weight_only.IDS)
def test_int4_weight_matmuls_run_as_matmulnbits_and_equal_the_original(
    symmetric: bool, block: int
) -> None:
    model = weight_only.quantized(symmetric, block)
    session = _fused(quantgraph.convert(model).proto)
    kernels = {u.kernel for u in session.fusion_plan.units}
    assert "com.microsoft.MatMulNBits" in kernels, session.fusion_plan.to_dict()
    original = _original(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    for rows in (1, 3):  # shapes that change between runs
        x = np.random.default_rng(rows).standard_normal((rows, 8, 256)).astype(np.float32)
        _assert_same(original.run(None, {"x": x}), session.run(None, {"x": x}))


@pytest.mark.parametrize(("k", "block"), [(56, 16), (120, 32)])
@pytest.mark.parametrize("symmetric", [True, False], ids=["int4", "uint4"])
def test_short_last_blocks_go_back_whole_and_equal_the_original(
    k: int, block: int, symmetric: bool
) -> None:
    """A padded short last block (per_group op + marked Slice) is handed over as the blocked
    DequantizeLinear it was, so onnxruntime fuses it as it does the original."""
    model = producers.weight_only(k, block, symmetric)
    session = _fused(quantgraph.convert(model).proto)
    assert any(u.kernel == "com.microsoft.MatMulNBits" for u in session.fusion_plan.units)
    x = {"x": np.random.default_rng(k).standard_normal((3, k)).astype(np.float32)}
    original = _original(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    _assert_same(original.run(None, x), session.run(None, x))


def test_quantize_dynamic_models_are_within_float_rounding_of_the_original() -> None:
    """The converted integer ops sum in float32 where the original's sum in int32: measured at
    most 7.2e-7 apart (quantgraph.validation.compare.integer_sums)."""
    model = producers.dynamic_quantized()
    session = _fused(quantgraph.convert(model).proto)
    original = _original(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    for seed in range(3):
        feeds = make_inputs(model, seed=seed)
        for want, got in zip(original.run(None, feeds), session.run(None, feeds), strict=True):
            assert np.abs(np.asarray(want) - np.asarray(got)).max() < 2e-6


def _op_counts(path: Path) -> dict[str, int]:
    """Node kinds of an optimized model, every graph, spec ops counted as their Q/DQ
    (Constant nodes aside: the converter writes a subgraph's 1-D scales as Constants)."""
    as_qdq = {"DynamicQuantize": "QuantizeLinear", "DynamicDequantize": "DequantizeLinear"}
    counts: dict[str, int] = {}

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            kind = as_qdq.get(node.op_type, node.op_type)
            if kind == "Constant":
                continue
            counts[kind] = counts.get(kind, 0) + 1
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    walk(attribute.g)

    walk(onnx.load(path, load_external_data=False).graph)
    return counts


@pytest.mark.parametrize("case", ["transformer_u8", "cnn_s8", "contrib_cnn_opset12", *real.CASES])
def test_the_session_graph_is_the_originals_with_spec_ops_for_its_lone_q_dq(
    case: str, tmp_path: Path
) -> None:
    """What onnxruntime runs for fusion "onnxruntime" is, kernel for kernel, what it runs for
    the original at ENABLE_ALL: a spec op shared by a fused and an unfused reader (the
    transformer's input DequantizeLinear feeds LayerNormalization and the residual Add) must
    not keep the fused one from fusing."""
    if case in real.CASES:
        original: onnx.ModelProto | Path = real.quantized(case)
        converted = real.converted(case, False).proto
    elif case == "contrib_cnn_opset12":  # com.microsoft Q/DQ (UseQDQContribOps)
        original = producers.static_quantized(12, contrib=True)
        converted = quantgraph.convert(original).proto
    else:
        original = ROOT / "models" / f"{case}.onnx"
        converted = quantgraph.convert(original).proto
    options = _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    options.optimized_model_filepath = str(tmp_path / "original.onnx")
    ort_session(original, options)
    options = _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    options.optimized_model_filepath = str(tmp_path / "session.onnx")
    session = quantgraph.InferenceSession(
        converted, "native", options=options, fusion="onnxruntime"
    )
    assert _op_counts(tmp_path / "session.onnx") == _op_counts(tmp_path / "original.onnx")
    if case == "transformer_u8":
        units = {u.compute: u for u in session.fusion_plan.units}
        assert units["residual"].kernel == "com.microsoft.QLinearAdd"


def test_a_shared_dequantize_is_copied_per_reader_as_onnxruntime_does() -> None:
    """onnxruntime's EnsureUniqueDQForNodeUnit rules: one copy per same-graph reader input, the
    original kept by its first reader, or by a graph output or subgraph reader instead."""
    import onnx_ir as ir

    from quantgraph.fusion.ort.unique_dequantize import unique_dequantize

    dq = onnx.helper.make_node(
        "DynamicDequantize", ["q", "s"], ["d"], domain=DOMAIN, qtype="per_tensor", name="dq"
    )
    readers = [
        onnx.helper.make_node("Relu", ["d"], ["r"]),
        onnx.helper.make_node("Add", ["d", "d"], ["a"]),  # two reader inputs: two copies
    ]
    inputs = [
        onnx.helper.make_tensor_value_info("q", onnx.TensorProto.UINT8, [4]),
        onnx.helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, [1]),
    ]
    outputs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [4]) for n in "ra"]
    for extra_output, kept_by_first in ((False, True), (True, False)):
        graph_outputs = outputs + (
            [onnx.helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, [4])]
            if extra_output
            else []
        )
        proto = onnx.helper.make_model(
            onnx.helper.make_graph([dq, *readers], "g", inputs, graph_outputs),
            opset_imports=[onnx.helper.make_opsetid("", 21), onnx.helper.make_opsetid(DOMAIN, 1)],
        )
        model = ir.from_proto(proto)
        next(n for n in model.graph if n.name == "dq").metadata_props["quantgraph.origin"] = "x"
        assert unique_dequantize(model) == (2 if kept_by_first else 3)
        nodes = {n.outputs[0].name: n for n in model.graph}
        relu, add = nodes["r"], nodes["a"]
        read = [v.name for v in (*relu.inputs, *add.inputs) if v is not None]
        assert len(set(read)) == 3  # every reader input has its own
        assert ("d" in read) == kept_by_first
        makers = [v.producer() for v in relu.inputs if v]
        assert all(m is not None and m.op_type == "DynamicDequantize" for m in makers)
        copies = [n for n in model.graph if n.op_type == "DynamicDequantize"]
        assert all(n.metadata_props.get("quantgraph.origin") == "x" for n in copies)
        assert unique_dequantize(model) == 0  # nothing left to copy


# -- the plan --------------------------------------------------------------------------------


def test_the_plan_names_each_unit_and_why_spec_ops_run_alone() -> None:
    path = ROOT / "models" / "cnn_u8.onnx"
    plan = _fused(quantgraph.convert(path).proto).fusion_plan
    units = {u.compute: u for u in plan.units}
    assert units["conv1"].kernel.endswith("QLinearConv")
    assert set(units["conv1"].nodes) == {
        "conv1_w_DequantizeLinear",
        "input_DequantizeLinear",
        "relu1_QuantizeLinear",
    }
    assert units["fc"].kernel == "com.microsoft.QGemm"
    alone = {a.node: a for a in plan.alone}
    assert set(alone) == {"input_QuantizeLinear", "output_DequantizeLinear"}
    assert "onnxruntime keeps this QuantizeLinear" in alone["input_QuantizeLinear"].reason
    payload = plan.to_dict()
    assert payload["fused_spec_ops"] == 15 and payload["spec_ops_alone"] == 2


def test_spec_ops_left_alone_still_run_as_spec_ops() -> None:
    """A mixed plan: the session's model keeps the spec ops onnxruntime would not fuse."""
    proto = quantgraph.convert(ROOT / "models" / "cnn_u8.onnx").proto
    session = _fused(proto)
    assert session.fusion_plan.alone
    # The session ran them through quantgraph's kernels: one converted model, two plans.
    disabled = quantgraph.InferenceSession(
        proto,
        "native",
        fusion="onnxruntime",
        options=_options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
    )
    assert not disabled.fusion_plan.units
    reasons = {a.reason for a in disabled.fusion_plan.alone}
    assert reasons == {"the session's optimization level (ORT_DISABLE_ALL) fuses nothing"}
    feeds = make_inputs(proto, seed=0)
    reference = _original(
        ROOT / "models" / "cnn_u8.onnx", ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    _assert_same(reference.run(None, feeds), disabled.run(None, feeds))


def _options(level: ort.GraphOptimizationLevel) -> ort.SessionOptions:
    options = quiet_session_options(optimize=True)
    options.graph_optimization_level = level
    return options


def test_the_python_backend_runs_what_is_not_fused() -> None:
    path = ROOT / "models" / "transformer_u8.onnx"
    session = _fused(quantgraph.convert(path).proto, backend="python")
    assert session.fusion_plan.alone
    feeds = make_inputs(path, seed=1, dims={"batch": 3})
    original = _original(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    _assert_same(original.run(None, feeds), session.run(None, feeds))


def test_the_model_file_is_never_changed(tmp_path: Path) -> None:
    path = tmp_path / "cnn_qg.onnx"
    onnx.save(quantgraph.convert(ROOT / "models" / "cnn_u8.onnx").proto, path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    model = onnx.load(path)
    _fused(path)
    _fused(model)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert any(n.domain == DOMAIN for n in model.graph.node)  # the caller's proto too


def test_an_unknown_fusion_mode_is_one_line() -> None:
    with pytest.raises(
        BackendError, match="unknown fusion 'fast'; choose one of none, onnxruntime"
    ):
        quantgraph.InferenceSession(ROOT / "models" / "cnn_u8.onnx", "native", fusion="fast")


# -- the command line --------------------------------------------------------------------------


def test_cli_inspect_validate_and_run_take_fusion(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "cnn_qg.onnx"
    assert (
        runner.invoke(main, ["convert", str(ROOT / "models/cnn_u8.onnx"), str(out)]).exit_code == 0
    )
    shown = runner.invoke(main, ["inspect", str(out), "--fusion", "onnxruntime"])
    assert shown.exit_code == 0, shown.output
    assert "unit conv1 (Conv) -> onnxruntime com.microsoft.QLinearConv" in shown.output
    assert "alone input_QuantizeLinear (DynamicQuantize)" in shown.output
    checked = runner.invoke(
        main,
        [
            "validate",
            str(ROOT / "models/cnn_u8.onnx"),
            str(out),
            "--fusion",
            "onnxruntime",
            "--json",
        ],
    )
    assert checked.exit_code == 0, checked.output
    import json

    payload = json.loads(checked.output)
    assert payload["agree"] and payload["exact_expected"] and payload["fusion"] == "onnxruntime"
    assert "both at ORT_ENABLE_ALL" in payload["comparison"]
    assert payload["fusion_plan"]["fused_spec_ops"] == 15
    ran = runner.invoke(main, ["run", str(out), "--fusion", "onnxruntime", "--json"])
    assert ran.exit_code == 0 and json.loads(ran.output)["fusion_plan"]["mode"] == "onnxruntime"
    import jsonschema

    from quantgraph.schemas_json import schema

    for command, output in (("validate", checked), ("run", ran)):
        jsonschema.Draft202012Validator(schema(command)).validate(json.loads(output.output))


@pytest.mark.parametrize("schedule", [[], ["--fresh-processes"]], ids=["live", "fresh"])
def test_bench_model_times_each_variant_in_its_own_process(
    tmp_path: Path, schedule: list[str]
) -> None:
    out = tmp_path / "cnn_qg.onnx"
    onnx.save(quantgraph.convert(ROOT / "models" / "cnn_u8.onnx").proto, out)
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--model",
            str(ROOT / "models/cnn_u8.onnx"),
            str(out),
            "--rounds",
            "2",
            "--repeat",
            "3",
            "--json",
            *schedule,
        ],
    )
    assert result.exit_code == 0, result.output
    import json

    import jsonschema

    from quantgraph.schemas_json import schema

    payload = json.loads(result.output)
    jsonschema.Draft202012Validator(schema("bench")).validate(payload)
    rows = {row["label"]: row for row in payload}
    assert set(rows) == {
        "original ORT_ENABLE_ALL",
        "original ORT_DISABLE_ALL",
        "rewritten native fusion=none",
        "rewritten native fusion=onnxruntime",
    }
    for row in rows.values():
        assert row["error"] is None and len(row["process_medians_ms"]) == 2
        assert row["ratio_to_original"] > 0
        first, third = row["ratio_quartiles"]
        assert first <= row["ratio_to_original"] <= third
    assert rows["original ORT_ENABLE_ALL"]["ratio_to_original"] == 1.0
    assert rows["original ORT_ENABLE_ALL"]["ratio_quartiles"] == [1.0, 1.0]
    bad = CliRunner().invoke(main, ["bench", "--model", str(out), str(out), "--fusions", "x"])
    assert bad.exit_code == 2 and "--fusions" in bad.output


@pytest.mark.parametrize("schedule", [[], ["--fresh-processes"]], ids=["live", "fresh"])
def test_bench_model_reports_a_variant_that_cannot_run(schedule: list[str]) -> None:
    """The rewritten variants get the original's inputs, which this other model does not take:
    each says why, and the original's variants are timed all the same."""
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--model",
            str(ROOT / "models/cnn_u8.onnx"),
            str(ROOT / "models/transformer_u8.onnx"),
            "--rounds",
            "2",
            "--repeat",
            "2",
            "--json",
            *schedule,
        ],
    )
    assert result.exit_code == 0, result.output
    import json

    rows = {row["label"]: row for row in json.loads(result.output)}
    for label, row in rows.items():
        if label.startswith("original"):
            assert row["error"] is None and len(row["process_medians_ms"]) == 2
        else:
            assert row["error"] and "\n" not in row["error"] and row["median_ms"] is None
            assert row["ratio_quartiles"] is None


def test_bench_model_replies_survive_other_output_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library writing to the timed processes' stdout (here a sitecustomize's print, as
    ONEDNN_VERBOSE would) must not get between their replies."""
    (tmp_path / "sitecustomize.py").write_text("print('a line on stdout')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    from quantgraph.bench.models import bench_models

    rows = bench_models(
        ROOT / "models/cnn_u8.onnx",
        ROOT / "models/cnn_u8.onnx",
        fusions=("none",),
        rounds=2,
        runs=2,
        warmup=1,
        processes=5,  # more than rounds: one process a round is started
    )
    assert [row.error for row in rows] == [None, None, None]
    assert all(len(row.ratios) == 2 for row in rows)


# In the timed processes of the original at ORT_DISABLE_ALL only: onnxruntime's run sleeps
# for an hour from call QG_TEST_HANG_AFTER + 1 on, after noting that call's number.
HANGING_RUN = """
import os, sys, time
if "ORT_DISABLE_ALL" in " ".join(sys.argv):
    import onnxruntime
    with open(os.environ["QG_TEST_PIDS"], "a") as pids:
        pids.write(f"{os.getpid()}\\n")
    _run = onnxruntime.InferenceSession.run
    _calls = [0]
    def run(self, *args, **kwargs):
        _calls[0] += 1
        if _calls[0] > int(os.environ["QG_TEST_HANG_AFTER"]):
            with open(os.environ["QG_TEST_HUNG"], "a") as hung:
                hung.write(f"{_calls[0]}\\n")
            time.sleep(3600)
        return _run(self, *args, **kwargs)
    onnxruntime.InferenceSession.run = run
"""


@pytest.mark.parametrize(("fresh", "hang_after"), [(False, 0), (False, 4), (True, 0)])
def test_bench_model_kills_a_process_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: bool, hang_after: int
) -> None:
    """A timed process that hangs (hang_after 0: in its first call, while warming up; 4: in
    its first turn, after start-up's 3 warm-up calls and the turn's first) is killed after
    --turn-timeout and its variant reported as failed, the others timed as usual, no process
    left behind."""
    (tmp_path / "sitecustomize.py").write_text(HANGING_RUN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("QG_TEST_HANG_AFTER", str(hang_after))
    pids, hung = tmp_path / "pids", tmp_path / "hung"
    monkeypatch.setenv("QG_TEST_PIDS", str(pids))
    monkeypatch.setenv("QG_TEST_HUNG", str(hung))
    from quantgraph.bench.models import bench_models

    rows = {
        row.label: row
        for row in bench_models(
            ROOT / "models/cnn_u8.onnx",
            ROOT / "models/cnn_u8.onnx",
            fusions=("none",),
            rounds=2,
            runs=2,
            warmup=3,
            processes=1,
            fresh_processes=fresh,
            turn_timeout=6.0,  # the others' start-up fits in it on a loaded machine
        )
    }
    silent = rows.pop("original ORT_DISABLE_ALL")
    assert silent.error == "no answer within 6 s (--turn-timeout): its process was killed"
    assert [int(n) for n in hung.read_text().split()] == [hang_after + 1]
    for row in rows.values():
        assert row.error is None and len(row.ratios) == 2
    for pid in [int(line) for line in pids.read_text().split()]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_bench_model_refuses_a_turn_timeout_out_of_range() -> None:
    from quantgraph.bench.models import bench_models

    model = ROOT / "models/cnn_u8.onnx"
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="turn_timeout must be"):
            bench_models(model, model, turn_timeout=bad)
    for value in ("0", "inf", "1e300"):
        given = ["bench", "--model", str(model), str(model), "--turn-timeout", value]
        refused = CliRunner().invoke(main, given)
        assert refused.exit_code == 2 and "--turn-timeout" in refused.output


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--rounds", "3"], "--rounds"),
        (["--turn-timeout", "5"], "--turn-timeout"),
        (["--fresh-processes"], "--fresh-processes"),
        (["--processes", "2"], "--processes"),
        (["--backends", "onednn"], "--backends"),
        (["--fusions", "auto"], "--fusions"),
        (["--model", "M", "M", "--fresh-processes", "--processes", "2"], "--processes"),
        (["--model", "M", "M", "--sizes", "100"], "--sizes"),
        (["--model", "M", "M", "--no-spinning"], "--no-spinning"),
    ],
)
def test_bench_refuses_options_the_chosen_timing_ignores(arguments: list[str], named: str) -> None:
    model = str(ROOT / "models/cnn_u8.onnx")
    given = [model if a == "M" else a for a in arguments]
    bad = CliRunner().invoke(main, ["bench", *given])
    assert bad.exit_code == 2 and named in bad.output and "applies only" in bad.output
