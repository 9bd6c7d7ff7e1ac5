"""What every command's schema is built from: the value types, closed objects, arrays, and the
$defs more than one command's report holds (a float JSON cannot print, oneDNN's version)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
BOOL: Schema = {"type": "boolean"}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
SHAPE: Schema = {"type": "array", "items": {"type": "integer", "minimum": 0}}
# JSON has no inf or NaN: such a float is printed as one of these strings.
FLOAT: Schema = {"oneOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}]}
COUNTS: Schema = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}
# The first and third quartiles of a timing's rounds (null: not timed).
QUARTILES: Schema = {
    "oneOf": [
        {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        {"type": "null"},
    ]
}


def closed_object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with exactly these fields (a new one goes into its module and docs/json.md)."""
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": False,
    }


def array_of(items: Schema) -> Schema:
    return {"type": "array", "items": items}


# A place that can be kept in float (quantgraph.passes.floating.float_candidates) and the error it
# introduces: fallback's ranking and validate --sensitivity list these fields first.
FLOAT_CANDIDATE: dict[str, Schema] = {
    "kind": {"enum": ["chain", "weights"]},
    "name": STRING,
    "names": array_of(STRING),
    "op_type": STRING,
    "label": STRING,
    "sqnr_db": {"type": ["number", "null"]},
}

DEFS: dict[str, Schema] = {
    "float": FLOAT,
    "onednn": {
        "description": "The oneDNN that ran the spec ops (version and library path); null when "
        "the backend is not onednn.",
        "type": ["string", "null"],
    },
}
