"""A real headless Chromium for the HTML report's tests (Debian's chromium-headless-shell,
which ``make test`` installs when it runs as root on Debian, or chromium)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

NAMES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def browser() -> str:
    """The browser's path; skips (fails under CI, whose set-up installs it) when none is found."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    message = (
        "no headless Chromium on PATH (`make browser` installs Debian's chromium-headless-shell)"
    )
    if os.environ.get("CI"):
        pytest.fail(message + ": CI's set-up must provide it")
    pytest.skip(message)


def _run(page: Path, *flags: str) -> tuple[str, float]:
    command = [
        browser(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-extensions",
        "--no-first-run",
        *flags,
        page.resolve().as_uri(),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, elapsed


def dom(page: Path, *flags: str) -> tuple[str, float]:
    """The page's DOM after its scripts ran, and how long the browser took (seconds)."""
    return _run(page, "--dump-dom", "--virtual-time-budget=5000", *flags)


def screenshot(page: Path, png: Path, width: int = 1100, height: int = 1600) -> Path:
    _run(page, f"--screenshot={png}", f"--window-size={width},{height}", "--hide-scrollbars")
    assert png.exists()
    return png
