"""``python -m quantgraph.cli``: as ``python -m quantgraph``."""

from __future__ import annotations

from .app import console_main

if __name__ == "__main__":
    console_main()
