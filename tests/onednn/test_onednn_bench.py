"""quantgraph bench times the native kernels in oneDNN's arithmetic and oneDNN itself beside
the rest of each row."""

from __future__ import annotations

from quantgraph.bench import kernels as bench
from tests.builders import requires_native, requires_onednn

pytestmark = [requires_native, requires_onednn]


def test_the_onednn_columns() -> None:
    rows = bench.run(
        sizes=(4096,),
        repeat=3,
        layouts=bench.LAYOUTS,
        weights=(),
        implementations=("native", "native_onednn", "onednn"),
    )
    assert len(rows) == len(bench.DIRECTIONS) * len(bench.LAYOUTS)
    for row in rows:
        if row.layout != "per_tensor" and "onednn" in row.notes:  # v3.13: per_channel zps
            assert "refused per_channel" in row.notes["onednn"]
            assert row.seconds["onednn"] is None
            continue
        assert not row.notes, row.notes
        for impl in ("native", "native_onednn", "onednn"):
            seconds = row.seconds[impl]
            assert seconds is not None and seconds > 0
        found = row.to_dict()
        assert found["native_onednn_over_native"] > 0 and found["onednn_over_native"] > 0
    table = bench.format_table(rows)
    assert "| arith/native | onednn/native |" in table
