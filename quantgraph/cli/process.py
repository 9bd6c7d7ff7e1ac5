"""How a quantgraph command ends: ``--debug`` accepted anywhere, Ctrl-C (:mod:`.interrupt`)
exits 130, and ``convert --validate``'s failure says which model failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import ModelError, one_line
from ..interrupt import (
    EXIT_INTERRUPTED,
    Interrupted,
    exit_interrupted,
    install_interrupt_handler,
    interrupted,
    note_interrupt,
)

__all__ = [
    "EXIT_INTERRUPTED",
    "DebugAnywhere",
    "Interrupted",
    "exit_interrupted",
    "install_interrupt_handler",
    "interrupted",
    "validation_failed",
]


class DebugAnywhere(click.Group):
    """A group whose ``--debug`` flag may also follow the subcommand or its arguments
    (``quantgraph convert --debug a b``); a ``--`` ends where it is looked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[1:end]:
            head = [a for a in args[:end] if a != "--debug"]
            args = ["--debug", *head, *args[end:]]
        parsed: list[str] = super().parse_args(ctx, args)
        return parsed

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (Interrupted, KeyboardInterrupt):  # KeyboardInterrupt: no handler (tests, -c)
            note_interrupt()
            exit_interrupted()


def validation_failed(
    error: Exception, stage: str | None, model_in: Path, model_out: Path
) -> Exception:
    """``convert --validate``'s error: which model failed (``stage``: the last one
    :func:`quantgraph.validate` reported), and that OUT, written before, stays."""
    if interrupted():
        return error
    side = f"OUT ({model_out})" if stage == "rewritten" else f"IN ({model_in})"
    return ModelError(
        f"--validate failed on {side}: {one_line(error)}; {model_out} was written and is kept"
    )
