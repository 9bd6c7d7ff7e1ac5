"""quantgraph inspect --json: what convert would rewrite and, with --backend, which spec nodes
that backend runs."""

from __future__ import annotations

from .common import STRING, Schema, array_of, closed_object
from .convert import REWRITE

DEFS: dict[str, Schema] = {
    "node_support": closed_object(
        {
            "node": STRING,
            "op": STRING,
            "status": {"enum": ["runs", "refused", "unknown"]},
            "reason": STRING,
        }
    ),
}

TITLE = (
    "quantgraph inspect --json: what convert would rewrite and, with --backend, which spec "
    "nodes that backend runs."
)
BODY: Schema = closed_object(
    REWRITE,
    {
        "backend_support": closed_object(
            {
                "backend": {"enum": ["native", "python", "onednn"]},
                "onednn": {"$ref": "#/$defs/onednn"},
                "nodes": array_of({"$ref": "#/$defs/node_support"}),
            }
        ),
        "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
    },
)
