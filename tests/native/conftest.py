"""Native-backend tests (tests/native/): every module skips, with the reason, when the C++
library is not built."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

ISAS = ("scalar", "avx2", "avx512")


@pytest.fixture(params=ISAS)
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each kernel table in turn (capped at what the CPU has: where it lacks one, the test
    runs on the best table it has)."""
    old = os.environ.get("QUANTGRAPH_NATIVE_ISA")
    os.environ["QUANTGRAPH_NATIVE_ISA"] = str(request.param)
    try:
        yield str(request.param)
    finally:
        if old is None:
            del os.environ["QUANTGRAPH_NATIVE_ISA"]
        else:
            os.environ["QUANTGRAPH_NATIVE_ISA"] = old
