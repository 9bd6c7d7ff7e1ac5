"""The C++ tree has a folder per target (custom_ops/README.md, "Layout"): src/common/ is compiled
into both kernel libraries, src/native/ and src/onednn/ into one each; includes point from a
target to common/ only, and no source file grows past 700 lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "custom_ops" / "src"
TARGETS = ("common", "native", "onednn")
MAX_LINES = 700
INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def _sources() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*") if p.suffix in (".cc", ".h"))


def test_every_source_is_in_a_target_folder() -> None:
    sources = _sources()
    assert sources
    outside = [
        p.relative_to(SOURCES) for p in sources if p.relative_to(SOURCES).parts[0] not in TARGETS
    ]
    assert not outside, f"sources outside src/{{{','.join(TARGETS)}}}/: {outside}"


def test_no_source_over_the_line_limit() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _sources()
        if (n := p.read_text().count("\n")) > MAX_LINES
    }
    assert not long, f"C++ files over {MAX_LINES} lines (split them by concern): {long}"


def test_includes_point_to_common_only() -> None:
    """common/ includes only common/; a target includes common/ and itself, never the other."""
    wrong = []
    for path in _sources():
        target = path.relative_to(SOURCES).parts[0]
        for name in INCLUDE.findall(path.read_text()):
            if (path.parent / name).is_file():  # beside the includer (kernels/ siblings)
                continue
            first = name.split("/")[0]
            allowed = {"common"} if target == "common" else {"common", target}
            if first not in allowed or not (SOURCES / name).is_file():
                wrong.append(f"{path.relative_to(SOURCES)}: {name}")
    assert not wrong, "includes across targets (or of missing files):\n" + "\n".join(wrong)


def test_cmake_builds_every_source_file() -> None:
    """Every .cc is in a CMake target and every source CMake names exists."""
    cmake = (ROOT / "custom_ops" / "CMakeLists.txt").read_text()
    cmake += (ROOT / "custom_ops" / "cmake" / "onednn.cmake").read_text()
    named = set(re.findall(r"\bsrc/[\w/]+\.cc\b", cmake))
    present = {str(p.relative_to(SOURCES.parent)) for p in _sources() if p.suffix == ".cc"}
    assert named == present
