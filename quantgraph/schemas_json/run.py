"""quantgraph run --json: the backend and a summary of every output."""

from __future__ import annotations

from .common import NULLABLE_STRING, SHAPE, STRING, Schema, array_of, closed_object
from .validate import INPUTS

DEFS: dict[str, Schema] = {
    "output_summary": closed_object(
        {
            "name": STRING,
            "dtype": STRING,
            "shape": SHAPE,
            "min": {"type": ["number", "boolean", "null"]},
            "max": {"type": ["number", "boolean", "null"]},
        }
    ),
}

TITLE = "quantgraph run --json: the backend and a summary of every output."
BODY: Schema = closed_object(
    {
        "backend": {"enum": ["native", "python", "onednn"]},
        "arithmetic": {"enum": ["onnx", "onednn"]},
        "onednn": {"$ref": "#/$defs/onednn"},
        "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
        "outputs": array_of({"$ref": "#/$defs/output_summary"}),
        "output_file": NULLABLE_STRING,
        "seed": {"type": ["integer", "null"]},
        "inputs": INPUTS,
    }
)
