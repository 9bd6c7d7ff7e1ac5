"""The documentation site (issue #36): it builds strictly (a broken link or reference fails),
every command its pages show runs on the bundled models, and it renders in a real browser."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests import browser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=QUIET,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("site")
    done = _build(ROOT / "mkdocs.yml", built)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return built


def test_the_site_builds_with_every_page_and_reference(site: Path) -> None:
    api = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    for name in ("convert", "lower", "validate", "InferenceSession", "write_html", "tune_inputs"):
        assert name in api, name
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("convert", "validate", "run", "inspect", "lower", "bench", "tune"):
        assert f"quantgraph {command}" in cli, command


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nSee [a page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        (ROOT / "mkdocs.yml").read_text().split("nav:")[0].replace("docs_dir: docs", "")
        + f"docs_dir: {docs}\n"
    )
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "missing.md" in done.stderr, done.stderr[-2000:]


def _pages_with_commands() -> Iterator[Path]:
    for page in sorted(DOCS.rglob("*.md")):
        if CONSOLE.search(page.read_text(encoding="utf-8")):
            yield page


@pytest.mark.parametrize("page", list(_pages_with_commands()), ids=lambda p: p.stem)
def test_every_command_the_docs_show_runs(page: Path, tmp_path: Path) -> None:
    """Each page's `$ quantgraph ...` lines, in order, in a folder of their own beside the
    bundled models (as from the repository root)."""
    (tmp_path / "models").symlink_to(ROOT / "models")
    commands = [
        line[2:]
        for block in CONSOLE.findall(page.read_text(encoding="utf-8"))
        for line in block.splitlines()
        if line.startswith("$ ")
    ]
    assert commands and all(c.startswith("quantgraph ") for c in commands), commands
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QUANTGRAPH_TUNING": "measure"}
    for command in commands:
        args = shlex.split(command)[1:]
        done = subprocess.run(
            [sys.executable, "-m", "quantgraph", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"{page.name}: {command}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("page", ["index.html", "reference/python/index.html"])
def test_the_site_renders_in_a_browser(site: Path, page: str, tmp_path: Path) -> None:
    png = browser.screenshot(site / page, tmp_path / "page.png", width=1200, height=900)
    with Image.open(png) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, a header, links: not a blank page
