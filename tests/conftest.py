"""Suite-wide set-up: fusion "auto"'s decision cache lives in a folder of the test run, never
in the user's ~/.cache (subprocesses inherit the variable)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _tuning_cache() -> Iterator[None]:
    previous = os.environ.get("QUANTGRAPH_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="quantgraph-test-cache-") as folder:
        os.environ["QUANTGRAPH_CACHE_DIR"] = folder
        yield
    if previous is None:
        os.environ.pop("QUANTGRAPH_CACHE_DIR", None)
    else:
        os.environ["QUANTGRAPH_CACHE_DIR"] = previous
