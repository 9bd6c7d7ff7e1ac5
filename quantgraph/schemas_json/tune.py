"""quantgraph tune --json: fusion auto's measured decision for MODEL on this CPU."""

from __future__ import annotations

from .common import INT, STRING, Schema, closed_object

TITLE = "quantgraph tune --json: fusion auto's measured decision for MODEL on this CPU."
BODY: Schema = closed_object(
    {
        "model": STRING,
        "backend": {"enum": ["native", "python", "onednn"]},
        "arithmetic": {"enum": ["onnx", "onednn"]},
        "threads": INT,
        "inputs": {"type": "object"},
        "tuning": {"$ref": "#/$defs/tuning"},
        "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
    }
)
