"""ruff and mypy run clean: part of the test suite so CI enforces them."""

from __future__ import annotations

import re
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


MAX_TEST_LINES = 900  # a test file past this mixes concerns: split it by what it tests


def test_no_test_file_is_over_900_lines() -> None:
    """Every module under tests/ (test files and their helpers) stays readable in one sitting."""
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_TEST_LINES
    }
    assert not long, f"over {MAX_TEST_LINES} lines: {long}"


def test_tests_reach_their_helpers_without_sys_path_edits() -> None:
    """tests/ is a package (tests.builders, tests.native.native_support...): pytest's rootdir
    handling imports it, so no conftest or test file edits sys.path."""
    edits = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if path != Path(__file__).resolve()
        and re.search(r"sys\.path\.(insert|append)", path.read_text())
    ]
    assert not edits, edits
    for folder in [ROOT / "tests", *(p for p in (ROOT / "tests").iterdir() if p.is_dir())]:
        if folder.name != "__pycache__" and any(folder.glob("*.py")):
            assert (folder / "__init__.py").exists(), f"{folder.relative_to(ROOT)} is no package"
