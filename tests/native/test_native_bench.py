"""quantgraph.bench runs every implementation on a small size and formats its table."""

from __future__ import annotations

import json

from native_support import requires_native

from quantgraph import bench

pytestmark = requires_native


def test_bench_rows_and_table() -> None:
    lines: list[str] = []
    rows = bench.run(sizes=(1000,), repeat=3, progress=lines.append)
    layouts = bench.DEFAULT_LAYOUTS
    assert len(rows) == len(bench.DIRECTIONS) * len(layouts) == len(lines)
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
    table = bench.format_table(rows)
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
