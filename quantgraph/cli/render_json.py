"""What the command line prints under ``--json``: the report as JSON, and errors as a JSON object
on stdout as well as the line on stderr.

A script that reads ``quantgraph ... --json`` gets JSON whatever happens: the command's report
(docs/json.md), or ``{"error": "<the one-line message>", "exit_code": 2}`` with exit code 2.
That holds for click's usage errors too (a bad option value, a missing argument), found by
``--json`` among the raw arguments since they fail before any option is parsed.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import click

from .args.base import group_option

JSON_OPTION = group_option(
    "render_json",
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as JSON (docs/json.md); an error as {error, exit_code}.",
)


def print_json(payload: object) -> None:
    """The report as JSON on stdout (every command's ``--json``)."""
    safe = json_safe(payload)
    click.echo(json.dumps(safe, indent=2, sort_keys=False, default=str, allow_nan=False))


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as "inf", "-inf" or "nan" (JSON has none: Python's
    json module would print ``Infinity``, which strict parsers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def error_object(message: str, exit_code: int) -> dict[str, object]:
    return {"error": message, "exit_code": exit_code}


def echo_error(message: str, exit_code: int) -> None:
    """The JSON error object on stdout, when the running command was given --json."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        click.echo(json.dumps(error_object(message, exit_code)))


def _asks_json(args: Sequence[str]) -> bool:
    options = list(args)[: list(args).index("--")] if "--" in args else args
    return "--json" in options


class JsonErrorGroup(click.Group):
    """click's group whose usage errors are also JSON objects on stdout under --json."""

    _json = False

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        self._json = _asks_json(argv)
        return super().main(argv, *rest, **extra)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as error:
            self._echo(error)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as error:
            self._echo(error)
            raise

    def _echo(self, error: click.ClickException) -> None:
        if self._json:
            click.echo(json.dumps(error_object(error.format_message(), error.exit_code)))
