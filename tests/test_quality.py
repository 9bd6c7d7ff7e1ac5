"""ruff and mypy run clean: part of the test suite so CI enforces them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = BIN / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if which is None:
        pytest.fail(f"{name} is not installed (pip install -e '.[dev]')")
    return which


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "quantgraph", "tools", "tests", "models", "benchmarks"],
        ["ruff", "format", "--check", "quantgraph", "tools", "tests", "models", "benchmarks"],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_is_clean(command: list[str]) -> None:
    result = subprocess.run(
        [_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
