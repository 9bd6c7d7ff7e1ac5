"""quantgraph convert --json: the rewrite (which lower and inspect report too) and OUT."""

from __future__ import annotations

from ..passes.report import SKIP_CODES
from .common import COUNTS, STRING, Schema, array_of, closed_object

DEFS: dict[str, Schema] = {
    "converted_node": closed_object(
        {
            "node": STRING,
            "op_type": STRING,
            "new_op_type": STRING,
            "detail": STRING,
            "graph": STRING,
        }
    ),
    "other_quantized_node": closed_object(
        {
            "node": STRING,
            "op_type": STRING,
            "code": {"enum": ["qoperator", "packed_weight_only", "integer_op", "fused_dynamic"]},
            "advice": STRING,
            "graph": STRING,
        }
    ),
    "skipped_node": closed_object(
        {
            "node": STRING,
            "op_type": STRING,
            "reason": STRING,
            "graph": STRING,
            "code": {"enum": sorted(SKIP_CODES)},
        }
    ),
}

# What was (or would be) rewritten: convert, lower and inspect all report it.
REWRITE: dict[str, Schema] = {
    "converted": COUNTS,
    "emitted": COUNTS,
    "skipped": array_of({"$ref": "#/$defs/skipped_node"}),
    "nodes": array_of({"$ref": "#/$defs/converted_node"}),
    "other_quantized": array_of({"$ref": "#/$defs/other_quantized_node"}),
    "already": COUNTS,
    "unchecked": COUNTS,
}

TITLE = (
    "quantgraph convert --json: the rewrite, OUT (absent under --dry-run) and, with "
    "--validate, the validation."
)
BODY: Schema = closed_object(
    REWRITE, {"output": STRING, "validation": {"$ref": "#/$defs/validation"}}
)
