"""One test file per graph pass (tests/passes/): the shared modules of tests/ (builders, ...)
are imported from here as from the test files beside them."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent.parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
