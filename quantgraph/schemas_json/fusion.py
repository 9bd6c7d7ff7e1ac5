"""The fusion plan validate, run, inspect and tune report: the units formed, the spec ops left
alone, and fusion auto's measured decision (tuning)."""

from __future__ import annotations

from .common import INT, NULLABLE_STRING, QUARTILES, SHAPE, STRING, Schema, array_of, closed_object

DEFS: dict[str, Schema] = {
    "fusion_unit": closed_object(
        {
            "compute": STRING,
            "op_type": STRING,
            "nodes": array_of(STRING),
            "engine": STRING,
            "kernel": STRING,
            "graph": STRING,
            "reason": STRING,
        }
    ),
    "fusion_alone": closed_object(
        {"node": STRING, "op_type": STRING, "reason": STRING, "graph": STRING}
    ),
    "fusion_plan": closed_object(
        {
            "mode": {"enum": ["none", "onnxruntime", "onednn", "auto"]},
            "fused_spec_ops": INT,
            "spec_ops_alone": INT,
            "units": array_of({"$ref": "#/$defs/fusion_unit"}),
            "alone": array_of({"$ref": "#/$defs/fusion_alone"}),
            "no_unit": NULLABLE_STRING,  # why a requested fusion formed no unit
            "tuning": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/tuning"}]},
        }
    ),
    "tuning": closed_object(
        {
            "chosen": STRING,
            "source": {"enum": ["measured", "cache", "no partition", "not measured", "pending"]},
            "why": STRING,
            "candidates": array_of(
                closed_object(
                    {
                        "name": STRING,
                        "to_onednn": array_of(STRING),
                        "rest": {
                            "enum": [
                                "onnxruntime",
                                "none",
                                "onnxruntime, lone Q/DQ too",
                                "original",
                            ]
                        },
                        "median_ms": {"type": ["number", "null"]},
                        "quartiles_ms": QUARTILES,
                        "ratio_to_onnxruntime": {"type": ["number", "null"]},
                        "ratio_quartiles": QUARTILES,
                        "dropped": NULLABLE_STRING,
                    }
                )
            ),
            "rounds": INT,
            "measurements": INT,
            "runner_up": NULLABLE_STRING,
            "settled": {"type": ["boolean", "null"]},
            "isolation": NULLABLE_STRING,
            "shapes": {"type": "object", "additionalProperties": SHAPE},
            "measured_at": NULLABLE_STRING,
            "age_seconds": {"type": ["number", "null"]},
            "cache_file": NULLABLE_STRING,
        }
    ),
}
