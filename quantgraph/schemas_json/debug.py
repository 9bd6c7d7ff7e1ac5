"""The float original vs its QDQ form with --intermediate (the ``debug`` of validate's report;
quantgraph.validation.debug.debugger): each quantized tensor and node, the worst, and what
keeping each in float gains (--sensitivity)."""

from __future__ import annotations

from .common import BOOL, FLOAT_CANDIDATE, INT, STRING, Schema, array_of, closed_object

# Why a place loses precision (quantgraph.validation.debug.qparams); null: none of these.
REASON: Schema = {"enum": [None, "clipping", "coarse scale", "rounding"]}

DEFS: dict[str, Schema] = {
    "debug": closed_object(
        {
            "tensors": array_of({"$ref": "#/$defs/quantized_tensor"}),
            "nodes": array_of({"$ref": "#/$defs/quantized_node"}),
            "nodes_error": {"type": ["string", "null"]},
            "worst": array_of(
                closed_object(
                    {
                        "kind": {"enum": ["tensor", "node"]},
                        "name": STRING,
                        "op_type": STRING,
                        "sqnr_db": {"type": "number"},
                        "reason": REASON,
                    }
                )
            ),
            "headline": {"type": ["string", "null"]},
            "baseline_sqnr_db": {"type": ["number", "null"]},
            "sensitivity": {
                "oneOf": [
                    {"type": "null"},
                    array_of(
                        closed_object(
                            {
                                **FLOAT_CANDIDATE,
                                "reason": REASON,
                                "output_sqnr_db": {"type": ["number", "null"]},
                                "gain_db": {"type": ["number", "null"]},
                                "suggested": BOOL,
                                "keep_float": STRING,
                                "float_model": BOOL,
                            }
                        )
                    ),
                ]
            },
        }
    ),
    "quantized_tensor": closed_object(
        {
            "tensor": STRING,
            "node": STRING,
            "dtype": STRING,
            "per_channel": BOOL,
            "channels": INT,
            "worst_channel": {"type": ["integer", "null"]},
            "scale": {"type": "number"},
            "zero_point": {"type": "integer"},
            "elements": INT,
            "observed_range": {"oneOf": [{"type": "null"}, array_of({"type": "number"})]},
            "representable_range": array_of({"type": "number"}),
            "clipped_low": {"type": "number"},
            "clipped_high": {"type": "number"},
            "rounded_to_zero": {"type": "number"},
            "levels": {"type": "number"},
            "sqnr_db": {"type": ["number", "null"]},
            "reason": REASON,
        }
    ),
    "quantized_node": closed_object(
        {
            "node": STRING,
            "op_type": STRING,
            "output": STRING,
            "constants": array_of(STRING),
            "weight_levels": {"type": ["number", "null"]},
            "sqnr_db": {"type": ["number", "null"]},
            "reason": REASON,
        }
    ),
}
