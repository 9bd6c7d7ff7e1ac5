"""quantgraph validate --json (and convert --validate): the comparison of ORIGINAL and
REWRITTEN, with the inputs both were fed (which run and bench report too)."""

from __future__ import annotations

from . import debug, generation, intermediate
from .common import (
    BOOL,
    FLOAT,
    INT,
    NULLABLE_STRING,
    SHAPE,
    STRING,
    Schema,
    array_of,
    closed_object,
)

# Input name -> what it was: generated (from a seed) or read from --inputs.
INPUTS: Schema = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [{"$ref": "#/$defs/generated_input"}, {"$ref": "#/$defs/given_input"}]
    },
}

# A comparison beside the verdict (--optimized, the ONNX-arithmetic original), never part of it.
INFORMATIONAL: dict[str, Schema] = {
    "comparison": STRING,
    "comparison_note": STRING,
    "part_of_verdict": {"const": False},
    "atol": {"type": "number"},
    "rtol": {"type": "number"},
    "within_tolerance": BOOL,
    "outputs": {"type": "array", "items": {"$ref": "#/$defs/tensor_comparison"}},
}

# The parts a validation holds, validate --intermediate's, the validation itself, then its
# generation, debug and error stats: the order a schema's $defs were always listed in (keep it,
# so the .json files stay as they are).
DEFS: dict[str, Schema] = {
    "tensor_comparison": closed_object(
        {
            "name": STRING,
            "dtype": STRING,
            "shape": SHAPE,
            "elements": INT,
            "mismatches": INT,
            "max_abs_diff": {"$ref": "#/$defs/float"},
            "max_ulp_diff": INT,
            "first_mismatch": {"type": ["integer", "null"]},
            "agree": BOOL,
        },
        {"beyond_tolerance": INT, "within_tolerance": BOOL},
    ),
    "generated_input": closed_object(
        {
            "dtype": STRING,
            "shape": SHAPE,
            "range": {
                "oneOf": [{"type": "null"}, {"type": "array", "items": FLOAT, "minItems": 2}]
            },
            "why": STRING,
            "shape_from": array_of(STRING),  # per axis: where its size came from
        }
    ),
    "input_search": closed_object(
        {
            "first_error": STRING,
            "attempt": INT,
            "plan": STRING,
            "tried": array_of({"$ref": "#/$defs/tried_plan"}),
        }
    ),
    "tried_plan": closed_object(
        {
            "number": INT,
            "plan": STRING,
            "estimate": {"type": ["integer", "null"]},
            "status": {"enum": ["ran", "failed", "over budget", "too large", "not reached"]},
        }
    ),
    "memory": closed_object(
        {
            "estimate": INT,
            "weights": INT,
            "unresolved": INT,
            "budget": {"type": ["integer", "null"]},
        }
    ),
    "given_input": closed_object({"dtype": STRING, "shape": SHAPE, "from": {"const": "--inputs"}}),
    "optimized": closed_object(INFORMATIONAL),
    "onnx_arithmetic": closed_object(
        {
            **INFORMATIONAL,
            # per output: its largest difference in quantization steps (null: no single step)
            "max_abs_diff_steps": {
                "type": "object",
                "additionalProperties": {"type": ["number", "null"]},
            },
        }
    ),
    # the copy of the original a comparison with other kernels is judged against
    # (quantgraph.validation.compare.like_reference), and the original itself beside the verdict
    "like_reference": closed_object(
        {
            "model": STRING,
            "why": STRING,
            "changed_nodes": array_of(
                closed_object({"node": STRING, "op_type": STRING, "change": STRING})
            ),
            "original": closed_object(INFORMATIONAL),
        }
    ),
    # per output, the bound the model gives (quantgraph.validation.compare.rounding_spread)
    "bound": closed_object(
        {
            "rule": STRING,
            "factor": {"type": "number"},
            "runs": INT,
            "samples": INT,
            "sites": array_of(
                closed_object(
                    {
                        "node": STRING,
                        "tensor": STRING,
                        "kind": {"enum": ["sum", "rounding", "requantization"]},
                        "noise": {"type": "number"},
                    }
                )
            ),
            "outputs": {
                "type": "object",
                "additionalProperties": closed_object(
                    {
                        "spread": {"$ref": "#/$defs/float"},
                        "step": {"type": ["number", "null"]},
                        "atol": {"$ref": "#/$defs/float"},
                    }
                ),
            },
        }
    ),
    **intermediate.DEFS,
    "validation": closed_object(
        {
            "agree": BOOL,
            "criterion": STRING,
            "min_sqnr_db": {"type": ["number", "null"]},
            "values_compared": {"type": "integer", "minimum": 0},
            "few_values": NULLABLE_STRING,
            "comparison": STRING,
            "comparison_note": STRING,
            "exact_expected": BOOL,
            "backend": {"enum": ["native", "python", "onednn"]},
            "arithmetic": {"enum": ["onnx", "onednn"]},
            "onednn": {"$ref": "#/$defs/onednn"},
            "atol": {"type": "number"},
            "rtol": {"type": "number"},
            "seed": {"type": ["integer", "null"]},
            "samples": {"type": "integer", "minimum": 1},
            "sample_names": array_of(STRING),
            "inputs": INPUTS,
            "cases": {
                "oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": INPUTS}]
            },
            "outputs": array_of({"$ref": "#/$defs/tensor_comparison"}),
            "optimized": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/optimized"}]},
            "reference_arithmetic": {"enum": ["onnx", "onednn"]},
            "onnx_arithmetic": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/onnx_arithmetic"}]},
            "intermediate": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/intermediate"}]},
            "input_search": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/input_search"}]},
            "memory": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/memory"}]},
            "reference": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/like_reference"}]},
            "bound": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/bound"}]},
            "float_reference": BOOL,
            "qoperator": array_of({"type": "string"}),
            "fusion": {"enum": ["none", "onnxruntime", "onednn", "auto"]},
            "fusion_plan": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/fusion_plan"}]},
            "debug": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/debug"}]},
            "error_stats": array_of({"$ref": "#/$defs/error_stats"}),
            "generation": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/generation"}]},
        }
    ),
    **generation.DEFS,
    **debug.DEFS,
    # per output, how the differences are spread (quantgraph.validation.compare.error_stats)
    "error_stats": closed_object(
        {
            "name": STRING,
            "elements": INT,
            "sqnr_db": {"type": ["number", "null"]},  # null: no noise (identical)
            "identical": BOOL,
            "nonfinite_differences": INT,
            "max_abs_diff": {"type": "number"},
            "step": {"type": ["number", "null"]},
            "max_abs_diff_steps": {"type": ["number", "null"]},
            "abs_histogram": {"type": "object", "additionalProperties": INT},
            "step_histogram": {
                "oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": INT}]
            },
        }
    ),
}

TITLE = "quantgraph validate --json: the comparison of ORIGINAL and REWRITTEN."
BODY: Schema = {"$ref": "#/$defs/validation"}
