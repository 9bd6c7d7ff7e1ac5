"""JSON Schemas (draft 2020-12) of what every command prints with ``--json`` (docs/json.md).

This package is their one source: a module per command (its title, its body and the $defs it
introduces), common.py what they share; ``<command>.json`` beside them are written from it
(``python -m quantgraph.schemas_json --write``; tests/test_json_schemas.py checks both that the
files are current and that each command's real output validates). Objects are closed
(``additionalProperties: false``): a new field must be added here and in docs/json.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import (
    bench,
    common,
    convert,
    error,
    fallback,
    fusion,
    inspect,
    lower,
    run,
    tune,
    validate,
)
from .common import (
    BOOL,
    COUNTS,
    FLOAT,
    INT,
    NULLABLE_STRING,
    QUARTILES,
    SHAPE,
    STRING,
    Schema,
)
from .debug import REASON
from .validate import INFORMATIONAL, INPUTS

__all__ = [
    "BOOL",
    "COMMANDS",
    "COUNTS",
    "DEFS",
    "DIALECT",
    "FLOAT",
    "HERE",
    "INFORMATIONAL",
    "INPUTS",
    "INT",
    "NULLABLE_STRING",
    "QUARTILES",
    "REASON",
    "SHAPE",
    "STRING",
    "Schema",
    "main",
    "render",
    "schema",
]

COMMANDS = (
    "convert", "lower", "validate", "run", "inspect", "bench", "tune", "fallback", "error"
)  # fmt: skip
HERE = Path(__file__).resolve().parent
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# A schema's $defs are listed in this order (the .json files keep the order they always had).
DEFS: dict[str, Schema] = {
    **common.DEFS,
    **fallback.DEFS,
    **convert.DEFS,
    **validate.DEFS,
    **fusion.DEFS,
    **bench.DEFS,
    **inspect.DEFS,
    **run.DEFS,
}

_TOP: dict[str, tuple[str, Schema]] = {
    "convert": (convert.TITLE, convert.BODY),
    "lower": (lower.TITLE, lower.BODY),
    "validate": (validate.TITLE, validate.BODY),
    "run": (run.TITLE, run.BODY),
    "inspect": (inspect.TITLE, inspect.BODY),
    "bench": (bench.TITLE, bench.BODY),
    "tune": (tune.TITLE, tune.BODY),
    "fallback": (fallback.TITLE, fallback.BODY),
    "error": (error.TITLE, error.BODY),
}


def schema(command: str) -> Schema:
    """The JSON Schema of ``command``'s --json output ("error": of any command's failure)."""
    if command not in _TOP:
        raise KeyError(f"no JSON schema for {command!r}; one of {', '.join(COMMANDS)}")
    title, body = _TOP[command]
    text = json.dumps(body)
    used = {name: DEFS[name] for name in _closure(text)}
    return {"$schema": DIALECT, "title": title, **body, **({"$defs": used} if used else {})}


def _closure(text: str) -> list[str]:
    """The $defs a schema's text refers to, directly or through other $defs, in DEFS order."""
    found: set[str] = set()
    pending = [text]
    while pending:
        current = pending.pop()
        for name in DEFS:
            if f'"#/$defs/{name}"' in current and name not in found:
                found.add(name)
                pending.append(json.dumps(DEFS[name]))
    return [name for name in DEFS if name in found]


def render(command: str) -> str:
    return json.dumps(schema(command), indent=2) + "\n"


def main(argv: list[str]) -> int:
    """``--write``: (re)write every ``<command>.json``; ``--check``: exit 1 if one is stale."""
    stale = (
        [c for c in COMMANDS if (HERE / f"{c}.json").read_text() != render(c)]
        if ("--check" in argv)
        else []
    )
    if "--write" in argv:
        for command in COMMANDS:
            (HERE / f"{command}.json").write_text(render(command))
    for command in stale:
        print(f"{HERE / command}.json is stale: run python -m quantgraph.schemas_json --write")
    return 1 if stale else 0
