"""Shared command line of the generators whose output is committed (header, docs)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository: targets do not depend on cwd


def write_or_print(render: Callable[[], str], default: Path, argv: list[str] | None) -> int:
    """``--write [PATH]`` writes ``render()`` to PATH (default ``ROOT/default``); else prints it."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--write":
        target = Path(args[1]) if len(args) > 1 else ROOT / default
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render())
        print(f"wrote {target}")
    else:
        sys.stdout.write(render())
    return 0
