"""How a quantgraph process ends: Ctrl-C exits 130, and ``--debug`` is accepted anywhere.

Ctrl-C: the console script installs a SIGINT handler that remembers the interruption and raises
:class:`Interrupted`. It is a ``BaseException`` that click does not turn into "Aborted!" (exit
1, the code of "models disagree"), and every ``finally`` still runs on its way up, so temporary
files go (:mod:`quantgraph.writing`). When it lands inside an extension module (onnxruntime's
start-up says "initialization failed", a Python kernel records it as a kernel error) the error
that comes out is another one: :func:`interrupted` still says what happened.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click

from .errors import ModelError, one_line

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a process Ctrl-C stopped
_received: list[int] = []


class Interrupted(BaseException):
    """SIGINT arrived (raised by the handler :func:`install_interrupt_handler` sets)."""


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _received:  # a second Ctrl-C while cleaning up: let the cleanup finish
        return
    _received.append(signum)
    raise Interrupted


def install_interrupt_handler() -> None:
    signal.signal(signal.SIGINT, _on_sigint)


def interrupted() -> bool:
    """Whether SIGINT arrived in this process (whatever exception it became)."""
    return bool(_received)


def exit_interrupted() -> NoReturn:
    from .progress import erase

    erase()
    click.echo("quantgraph: interrupted (nothing half-written was left behind)", err=True)
    sys.exit(EXIT_INTERRUPTED)


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
            _received.append(signal.SIGINT)
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
