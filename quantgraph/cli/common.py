"""What every quantgraph command shares: exit codes, the one-line error wrapper, JSON
printing, and the quiet onnxruntime logger. Only the command line (quantgraph.cli) uses it."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from ..errors import one_line
from ..progress import erase
from .process import exit_interrupted, interrupted
from .render_json import echo_error, json_safe

EXIT_OK, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


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
            return function(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except Exception as error:
            if interrupted():  # Ctrl-C that an extension module turned into another error
                exit_interrupted()
            if debug:
                erase()
                traceback.print_exc()
                sys.exit(EXIT_ERROR)
            fail(one_line(error))

    return wrapper  # type: ignore[return-value]


def bound_ranges(
    values: tuple[tuple[str, tuple[float, float]], ...],
) -> dict[str, tuple[float, float]]:
    return dict(values)  # parsed and checked by ValRangeType; the model checks the rest


def quiet_onnxruntime() -> None:
    """onnxruntime's own log lines never reach the terminal: its errors arrive as exceptions,
    which become quantgraph's one-line errors."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)


def bound_dims(values: tuple[tuple[str, int], ...]) -> dict[str, int]:
    return dict(values)  # parsed and checked by DimType; the model checks the rest


def print_json(payload: object) -> None:
    safe = json_safe(payload)
    click.echo(json.dumps(safe, indent=2, sort_keys=False, default=str, allow_nan=False))
