"""quantgraph bench --json: the kernels' rows, or with --model the whole models' variants."""

from __future__ import annotations

from .common import INT, NULLABLE_STRING, QUARTILES, SHAPE, STRING, Schema, array_of, closed_object
from .validate import INPUTS

DEFS: dict[str, Schema] = {
    "model_timing": closed_object(
        {
            "label": STRING,
            "process_medians_ms": array_of({"type": "number"}),
            "ratios": array_of({"type": "number"}),
            "error": NULLABLE_STRING,
            "inputs": INPUTS,
            "plan": NULLABLE_STRING,  # fusion auto's decision in the variant's first process
            "median_ms": {"type": ["number", "null"]},
            "ratio_to_original": {"type": ["number", "null"]},
            "ratio_quartiles": QUARTILES,
        }
    ),
    "bench_row": closed_object(
        {
            "op": STRING,
            "layout": STRING,
            "shape": SHAPE,
            "elements": INT,
            "bytes_moved": INT,
            "seconds": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
            "onnxruntime_over_native": {"type": ["number", "null"]},
            "python_over_native": {"type": ["number", "null"]},
            "python_over_numpy": {"type": ["number", "null"]},
            "native_onednn_over_native": {"type": ["number", "null"]},
            "onednn_over_native": {"type": ["number", "null"]},
            "native_over_native_per_tensor": {"type": ["number", "null"]},
            "native_bytes_per_second": {"type": ["number", "null"]},
            "copyto_bytes_per_second": {"type": ["number", "null"]},
            "notes": {"type": "object", "additionalProperties": STRING},
        }
    ),
}

TITLE = (
    "quantgraph bench --json: one row per op, layout and size (an array); with --model, "
    "one row per variant of the whole models."
)
BODY: Schema = {
    "anyOf": [
        array_of({"$ref": "#/$defs/bench_row"}),
        array_of({"$ref": "#/$defs/model_timing"}),
    ]
}
