"""quantgraph fallback --json: the float fallback found, every point on the way, the ranking."""

from __future__ import annotations

from .common import (
    BOOL,
    FLOAT_CANDIDATE,
    INT,
    NULLABLE_STRING,
    STRING,
    Schema,
    array_of,
    closed_object,
)

DEFS: dict[str, Schema] = {
    "fallback_point": closed_object(
        {
            "kept": array_of(STRING),
            "quality": {"type": ["number", "null"]},
            "ms": {"type": ["number", "null"]},
        }
    ),
    "fallback_candidate": closed_object(FLOAT_CANDIDATE),
}

TITLE = (
    "quantgraph fallback --json: the float fallback found for QUANTIZED, every point on "
    "the way, the ranking it started from, and OUT."
)
BODY: Schema = closed_object(
    {
        "target": {"type": "number"},
        "higher_is_better": BOOL,
        "reached": BOOL,
        "kept": array_of({"$ref": "#/$defs/fallback_candidate"}),
        "quality": {"type": ["number", "null"]},
        "evaluations": INT,
        "stopped": NULLABLE_STRING,
        "points": array_of({"$ref": "#/$defs/fallback_point"}),
        "metric": STRING,
        "baseline": {"$ref": "#/$defs/fallback_point"},
        "ranking": array_of({"$ref": "#/$defs/fallback_candidate"}),
        "runner": STRING,
        "notes": array_of(STRING),
        "output": STRING,
    }
)
