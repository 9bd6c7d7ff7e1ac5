"""Each rule has one home: what quantgraph/spec answers is not re-derived elsewhere.

The spec (quantgraph/spec) owns the op names and kinds, attribute defaults, data-type tables,
the dst-type rule and the node rules; the C++ side reads them from the generated header
(tests/test_codegen.py checks that side). This test greps the rest of the package and the
tools for the shapes the re-derivations used to take.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "quantgraph" / "spec"

FORBIDDEN = {
    "an op kind tested by its name": r'startswith\("Dynamic"\)|== "(Dynamic)?(De)?Quantize"'
    r'|in \("(Dynamic)?(De)?Quantize", "(Dynamic)?(De)?Quantize"\)',
    "a spec op named by a string literal": r'"(Dynamic)?(De)?Quantize"',
    "the removed dst helper": r"default_output_dtype",
    "a retyped attribute default": r'get_int\("axis", 1\)|get_string\("qtype", "per_tensor"\)'
    r"|axis: int = 1|qtype: str = \"per_tensor\"",
    "the dst-type rule re-derived": r"dtypes\.U8 if|else ir\.DataType\.UINT8$|else dtypes\.U8\b",
    "a second comparison rule": r"def mismatch_mask|np\.isnan\(\w+\) & np\.isnan",
    "the IR helpers under a private passes path": r"passes\._graph|from \._graph",
}


def _sources() -> list[Path]:
    files = [*(ROOT / "quantgraph").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]
    allowed = {ROOT / "quantgraph" / "reference" / "compare.py"}  # the one comparison rule
    return [f for f in files if SPEC not in f.parents and f not in allowed]


@pytest.mark.parametrize("what", list(FORBIDDEN))
def test_nothing_outside_the_spec_re_derives_it(what: str) -> None:
    pattern = re.compile(FORBIDDEN[what], re.M)
    found = [
        f"{path.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}: {match.group(0)}"
        for path in _sources()
        for text in [path.read_text()]
        for match in pattern.finditer(text)
    ]
    assert not found, f"{what}:\n" + "\n".join(found)


def test_the_package_holds_the_product_only() -> None:
    """Evidence generators live in tools/ (and benchmarks/), not in the shipped package."""
    shipped = {p.name for p in (ROOT / "quantgraph").rglob("*.py")}
    for name in ("fuzz.py", "conformance.py", "codegen.py", "docs.py", "_generated.py"):
        assert name not in shipped, name
    for path in (ROOT / "quantgraph").rglob("*.py"):
        text = path.read_text()
        assert "hypothesis" not in text, f"{path}: the package must not need dev dependencies"
        assert "argparse" not in text, f"{path}: command lines belong to cli.py or tools/"


def test_readme_layout_matches_the_tree() -> None:
    """Every folder and module docs/layout.md names exists, and every package module and
    top-level folder is named there."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"[\w.]+(?:/[\w.]*)?", layout))
    for entry in re.findall(r"^    (\S+/)", layout, re.M):
        assert (ROOT / entry).is_dir(), f"docs/layout.md names {entry}, which does not exist"
    package = ROOT / "quantgraph"
    for path in package.glob("*.py"):
        if path.name != "__init__.py":
            assert path.name in named, f"docs/layout.md does not name quantgraph/{path.name}"
    for folder in [p for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]:
        if folder.name != "_native":  # the built library's install folder
            assert f"{folder.name}/" in layout, f"docs/layout.md does not name {folder.name}/"
    for top in ("tools", "benchmarks", "custom_ops", "models", "tests", "docs"):
        assert (ROOT / top).is_dir()
