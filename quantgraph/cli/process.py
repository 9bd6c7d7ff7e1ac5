"""How a quantgraph command ends: exit codes, every expected failure as one line on stderr (and a
JSON object under --json), ``--debug`` accepted anywhere, Ctrl-C (:mod:`quantgraph.interrupt`)
exits 130, onnxruntime's log lines kept off the terminal, and ``convert --validate``'s failure
saying which model failed."""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

import click

from ..errors import ModelError, QuantgraphWarning, one_line
from ..interrupt import (
    EXIT_INTERRUPTED,
    Interrupted,
    exit_interrupted,
    install_interrupt_handler,
    interrupted,
    note_interrupt,
)
from ..ir.output_files import force_spelled
from ..progress import erase
from .render_json import echo_error

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_DISAGREE",
    "EXIT_ERROR",
    "EXIT_OK",
    "DebugAnywhere",
    "Interrupted",
    "errors_are_one_line",
    "exit_interrupted",
    "fail",
    "install_interrupt_handler",
    "interrupted",
    "quiet_onnxruntime",
    "validation_failed",
    "warnings_in_one_line",
]

EXIT_OK, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what shells report for a reader that went away
F = TypeVar("F", bound=Callable[..., Any])


def warnings_in_one_line() -> None:
    """quantgraph's own warnings (QuantgraphWarning) as one line on stderr,
    ``quantgraph: warning: ...``, not Python's two lines naming our source file."""
    shown = warnings.showwarning
    if getattr(shown, "quantgraph", False):
        return

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, QuantgraphWarning):
            shown(message, category, filename, lineno, file, line)
            return
        erase()
        click.echo(f"quantgraph: warning: {' '.join(str(message).split())}", err=True)

    show.quantgraph = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def fail(message: str) -> NoReturn:
    erase()
    echo_error(message, EXIT_ERROR)  # under --json, also a JSON object on stdout
    click.echo(f"quantgraph: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def errors_are_one_line(function: F) -> F:
    """Turn every expected failure into one line on stderr and exit code 2."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            with force_spelled("--force"):  # the library says force=True to Python callers
                return function(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`quantgraph inspect ... | head`): stop quietly, as tools
            # killed by SIGPIPE do; stdout goes to /dev/null so the exit's flush cannot fail.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_BROKEN_PIPE)
        except Exception as error:
            if interrupted():  # Ctrl-C that an extension module turned into another error
                exit_interrupted()
            if debug:
                erase()
                traceback.print_exc()
                sys.exit(EXIT_ERROR)
            fail(one_line(error))

    return wrapper  # type: ignore[return-value]


# glibc's malloc gives each thread that allocates an arena of its own (up to 8 a core), each
# reserving 64 MiB of address space, which ``ulimit -v`` counts: onnxruntime's thread pools
# and the writer's threads reserved hundreds of MiB (measured, run --fusion onnxruntime on
# 208 MiB of external weights: 1.2 GB of address space, 0.9 GB with 2 arenas).
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def cap_malloc_arenas() -> None:
    """At most :data:`MALLOC_ARENAS` malloc arenas in this process (glibc), unless the user
    set ``MALLOC_ARENA_MAX``."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a C library without mallopt: nothing to cap
        return
    mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


def quiet_onnxruntime() -> None:
    """onnxruntime's own log lines never reach the terminal: its errors arrive as exceptions,
    which become quantgraph's one-line errors."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)


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
    rewritten = stage in ("rewritten", "generation rewritten")
    side = f"OUT ({model_out})" if rewritten else f"IN ({model_in})"
    return ModelError(
        f"--validate failed on {side}: {one_line(error)}; {model_out} was written and is kept"
    )
