"""quantgraph.bench.kernels runs every implementation on a small size and formats its table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quantgraph.bench import kernels as bench
from quantgraph.bench import weights as bench_weights
from tests.native.native_support import requires_native

pytestmark = requires_native


WEIGHTS = ((64, 96),)  # small 4-bit weights: K and N multiples of 32


def test_bench_rows_and_table() -> None:
    lines: list[str] = []
    rows = bench.run(sizes=(1000,), repeat=3, progress=lines.append, weights=WEIGHTS)
    layouts = bench.DEFAULT_LAYOUTS
    weight_rows = [r for r in rows if r.op == bench_weights.WEIGHT_OP]
    rows = [r for r in rows if r.op != bench_weights.WEIGHT_OP]
    assert len(rows) == len(bench.DIRECTIONS) * len(layouts)
    assert len(rows) + len(weight_rows) == len(lines)
    assert [r.layout for r in weight_rows] == list(bench_weights.WEIGHT_LAYOUTS)
    for row in weight_rows:
        assert row.shape == (64, 96)
        for impl in bench_weights.WEIGHT_IMPLEMENTATIONS:
            seconds = row.seconds[impl]
            assert seconds is not None and seconds > 0
        assert row.seconds["python"] is None and "python" in row.notes
        json.dumps(row.to_dict())
    for row in rows:
        narrow = row.layout.startswith(bench.NARROW_PREFIX)
        columns = int(row.layout.removeprefix(bench.NARROW_PREFIX)) if narrow else None
        assert row.elements == (1000 // columns * columns if columns else 1000)
        assert row.seconds["numpy"] is not None and row.seconds["python"] is not None
        assert row.seconds["native"] is not None and row.seconds["native"] > 0
        assert row.seconds["onnxruntime"] is not None
        assert row.seconds["copyto"] is not None
        json.dumps(row.to_dict())
        if row.layout == "per_tensor":
            assert row.vs_per_tensor is None
        else:  # measured against native per-tensor in the same run
            assert row.vs_per_tensor is not None and row.vs_per_tensor > 0
    shapes = {r.layout: r.shape for r in rows if r.op == "quantize"}
    assert shapes == {
        "per_tensor": (1000,),
        "per_channel_outer": (8, 125),
        "per_channel_inner": (125, 8),
        "per_channel_inner_c16": (62, 16),
        "per_channel_inner_c64": (15, 64),
        "per_channel_inner_c384": (2, 384),
    }
    table = bench.format_table(rows + weight_rows)
    assert "| dequantize_4bit | u4_block32_axis0 | 64x96 |" in table
    assert "| quantize | per_channel_inner | 125x8 |" in table
    assert "native ISA" in table.splitlines()[0]


def test_channels_for() -> None:
    assert [bench.channels_for(n) for n in (1000, 65_536, 1_048_576, 16_777_216, 7)] == [
        8,
        256,
        1024,
        4096,
        1,
    ]


@pytest.mark.parametrize("layout", list(bench_weights.WEIGHT_LAYOUTS))
def test_weight_models_agree(layout: str) -> None:
    """The native and onnxruntime models of a 4-bit weight row compute the same bits."""
    notes: dict[str, str] = {}
    calls = bench_weights._weight_runners(layout, (64, 96), ("native", "onnxruntime"), notes)
    assert not notes
    outputs = []
    for impl in ("native", "onnxruntime"):
        calls[impl]()
        outputs.append(calls[impl].args[0].copy_outputs_to_cpu()[0].copy())  # type: ignore[attr-defined]
    assert outputs[0].shape == (64, 96) and np.isfinite(outputs[0]).all()
    assert np.array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))


def test_cli_weights_option() -> None:
    from click.testing import CliRunner

    from quantgraph.cli import main

    runner = CliRunner()
    args = ["bench", "--sizes", "1000", "--columns", "", "--repeat", "2", "--json"]
    none = runner.invoke(main, [*args, "--weights", ""])
    assert none.exit_code == 0, none.output
    assert not [r for r in json.loads(none.output) if r["op"] == bench_weights.WEIGHT_OP]
    small = runner.invoke(main, [*args, "--weights", "64x96"])
    rows = [r for r in json.loads(small.output) if r["op"] == bench_weights.WEIGHT_OP]
    assert rows and {tuple(r["shape"]) for r in rows} == {(64, 96)}
    bad = runner.invoke(main, [*args, "--weights", "10x10"])
    assert bad.exit_code == 2 and "multiples of 32" in bad.output
