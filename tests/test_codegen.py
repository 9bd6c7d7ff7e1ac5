"""The committed C++ view of the spec is what the generator prints today."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from quantgraph.spec import DOMAIN, OPS, RULES
from tools import gen_op_header as codegen

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / codegen.HEADER_PATH


def test_committed_header_is_up_to_date() -> None:
    assert HEADER.is_file(), (
        f"{codegen.HEADER_PATH} is missing: run `python -m tools.gen_op_header --write`"
    )
    committed = HEADER.read_text()
    rendered = codegen.render()
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            "committed",
            "generated",
            n=1,
        )
    )
    assert committed == rendered, (
        f"{codegen.HEADER_PATH} is stale: run `python -m tools.gen_op_header --write`\n"
        + diff[:4000]
    )


def test_render_is_deterministic_and_carries_the_spec() -> None:
    rendered = codegen.render()
    assert rendered == codegen.render()
    assert f'kDomain = "{DOMAIN}"' in rendered
    for name in OPS:
        assert f'k{name} = "{name}"' in rendered
    for rule_id in RULES:
        assert f'{{"{rule_id}", ' in rendered
    rows = sum(len(op.type_rows) for op in OPS.values())
    assert rendered.count("// f32 -> ") + rendered.count(" -> f32") == rows


def test_main_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "sub" / "op_spec.h"
    assert codegen.main(["--write", str(target)]) == 0
    assert target.read_text() == codegen.render()
    assert codegen.main([]) == 0
    printed = capsys.readouterr().out
    assert codegen.render() in printed
