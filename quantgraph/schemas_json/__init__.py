"""JSON Schemas (draft 2020-12) of what every command prints with ``--json`` (docs/json.md).

This module is their one source; ``<command>.json`` beside it are written from it
(``python -m quantgraph.schemas_json --write``; tests/test_json_schemas.py checks both that the
files are current and that each command's real output validates). Objects are closed
(``additionalProperties: false``): a new field must be added here and in docs/json.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..passes.report import SKIP_CODES

COMMANDS = (
    "convert", "lower", "validate", "run", "inspect", "bench", "tune", "fallback", "error"
)  # fmt: skip
HERE = Path(__file__).resolve().parent
DIALECT = "https://json-schema.org/draft/2020-12/schema"

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
BOOL: Schema = {"type": "boolean"}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
SHAPE: Schema = {"type": "array", "items": {"type": "integer", "minimum": 0}}
# Input name -> what it was: generated (from a seed) or read from --inputs.
INPUTS: Schema = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [{"$ref": "#/$defs/generated_input"}, {"$ref": "#/$defs/given_input"}]
    },
}
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


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": False,
    }


REASON: Schema = {"enum": [None, "clipping", "coarse scale", "rounding"]}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


DEFS: dict[str, Schema] = {
    "float": FLOAT,
    "fallback_point": _object(
        {
            "kept": _array(STRING),
            "quality": {"type": ["number", "null"]},
            "ms": {"type": ["number", "null"]},
        }
    ),
    "fallback_candidate": _object(
        {
            "kind": {"enum": ["chain", "weights"]},
            "name": STRING,
            "names": _array(STRING),
            "op_type": STRING,
            "label": STRING,
            "sqnr_db": {"type": ["number", "null"]},
        }
    ),
    "onednn": {
        "description": "The oneDNN that ran the spec ops (version and library path); null when "
        "the backend is not onednn.",
        "type": ["string", "null"],
    },
    "converted_node": _object(
        {
            "node": STRING,
            "op_type": STRING,
            "new_op_type": STRING,
            "detail": STRING,
            "graph": STRING,
        }
    ),
    "other_quantized_node": _object(
        {
            "node": STRING,
            "op_type": STRING,
            "code": {"enum": ["qoperator", "packed_weight_only", "integer_op", "fused_dynamic"]},
            "advice": STRING,
            "graph": STRING,
        }
    ),
    "skipped_node": _object(
        {
            "node": STRING,
            "op_type": STRING,
            "reason": STRING,
            "graph": STRING,
            "code": {"enum": sorted(SKIP_CODES)},
        }
    ),
    "tensor_comparison": _object(
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
    "generated_input": _object(
        {
            "dtype": STRING,
            "shape": SHAPE,
            "range": {
                "oneOf": [{"type": "null"}, {"type": "array", "items": FLOAT, "minItems": 2}]
            },
            "why": STRING,
            "shape_from": _array(STRING),  # per axis: where its size came from
        }
    ),
    "input_search": _object(
        {
            "first_error": STRING,
            "attempt": INT,
            "plan": STRING,
            "tried": _array({"$ref": "#/$defs/tried_plan"}),
        }
    ),
    "tried_plan": _object(
        {
            "number": INT,
            "plan": STRING,
            "estimate": {"type": ["integer", "null"]},
            "status": {"enum": ["ran", "failed", "over budget", "too large", "not reached"]},
        }
    ),
    "memory": _object(
        {
            "estimate": INT,
            "weights": INT,
            "unresolved": INT,
            "budget": {"type": ["integer", "null"]},
        }
    ),
    "given_input": _object({"dtype": STRING, "shape": SHAPE, "from": {"const": "--inputs"}}),
    "optimized": _object(INFORMATIONAL),
    "onnx_arithmetic": _object(
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
    "like_reference": _object(
        {
            "model": STRING,
            "why": STRING,
            "changed_nodes": _array(_object({"node": STRING, "op_type": STRING, "change": STRING})),
            "original": _object(INFORMATIONAL),
        }
    ),
    # per output, the bound the model gives (quantgraph.validation.compare.rounding_spread)
    "bound": _object(
        {
            "rule": STRING,
            "factor": {"type": "number"},
            "runs": INT,
            "samples": INT,
            "sites": _array(
                _object(
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
                "additionalProperties": _object(
                    {
                        "spread": {"$ref": "#/$defs/float"},
                        "step": {"type": ["number", "null"]},
                        "atol": {"$ref": "#/$defs/float"},
                    }
                ),
            },
        }
    ),
    "divergence": _object(
        {
            "node": STRING,
            "op_type": STRING,
            "rewritten_op_type": STRING,
            "tensor": STRING,
            "max_abs_diff": {"$ref": "#/$defs/float"},
            "max_ulp_diff": INT,
            "mismatches": INT,
            "elements": INT,
        }
    ),
    "intermediate": _object(
        {
            "tensors_compared": INT,
            "tensors_differing": INT,
            "first_divergence": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/divergence"}]},
            "differing": _array({"$ref": "#/$defs/tensor_comparison"}),
            "partitions": {
                "oneOf": [{"type": "null"}, _array({"$ref": "#/$defs/partition_check"})]
            },
            "first_partition_divergence": {
                "oneOf": [{"type": "null"}, {"$ref": "#/$defs/partition_divergence"}]
            },
        }
    ),
    # one oneDNN partition run alone on the spec composition's inputs (validate --intermediate)
    "partition_check": _object(
        {
            "node": STRING,
            "compute": STRING,
            "kernel": STRING,
            "reason": STRING,
            "note": STRING,
            "introduced_steps": {"type": ["number", "null"]},
            "inherited_steps": {"type": ["number", "null"]},
            "outputs": _array({"$ref": "#/$defs/partition_output"}),
        }
    ),
    "partition_output": _object(
        {
            "name": STRING,
            "step": {"type": ["number", "null"]},
            "introduced": {"$ref": "#/$defs/tensor_comparison"},
            "introduced_steps": {"type": ["number", "null"]},
            "inherited": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/tensor_comparison"}]},
            "inherited_steps": {"type": ["number", "null"]},
        }
    ),
    "partition_divergence": _object(
        {
            "node": STRING,
            "compute": STRING,
            "kernel": STRING,
            "tensor": STRING,
            "max_abs_diff": {"$ref": "#/$defs/float"},
            "max_abs_diff_steps": {"type": ["number", "null"]},
            "mismatches": INT,
            "elements": INT,
        }
    ),
    "validation": _object(
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
            "sample_names": _array(STRING),
            "inputs": INPUTS,
            "cases": {
                "oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": INPUTS}]
            },
            "outputs": _array({"$ref": "#/$defs/tensor_comparison"}),
            "optimized": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/optimized"}]},
            "reference_arithmetic": {"enum": ["onnx", "onednn"]},
            "onnx_arithmetic": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/onnx_arithmetic"}]},
            "intermediate": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/intermediate"}]},
            "input_search": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/input_search"}]},
            "memory": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/memory"}]},
            "reference": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/like_reference"}]},
            "bound": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/bound"}]},
            "float_reference": BOOL,
            "qoperator": _array({"type": "string"}),
            "fusion": {"enum": ["none", "onnxruntime", "onednn", "auto"]},
            "fusion_plan": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/fusion_plan"}]},
            "debug": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/debug"}]},
            "error_stats": _array({"$ref": "#/$defs/error_stats"}),
            "generation": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/generation"}]},
        }
    ),
    # a decoder original: the greedy generation on both models
    # (quantgraph.validation.generation.greedy)
    "generation": _object(
        {
            "agree": BOOL,
            "skipped": NULLABLE_STRING,
            "note": STRING,
            "capped": NULLABLE_STRING,
            "seed": INT,
            "prompt_tokens": {"type": "integer", "minimum": 0},
            "prompt": _array(INT),
            "steps_run": {"type": "integer", "minimum": 0},
            "exact_expected": BOOL,
            "atol": {"type": ["number", "null"]},
            "rtol": {"type": ["number", "null"]},
            "tokens_original": _array(INT),
            "tokens_rewritten": _array(INT),
            "same_tokens": {"type": "integer", "minimum": 0},
            "first_divergence": {"type": ["integer", "null"]},
            "first_failing": {"type": ["integer", "null"]},
            "logits_max_abs_diff": {"$ref": "#/$defs/float"},
            "verdict": STRING,
            "steps": _array({"$ref": "#/$defs/generation_step"}),
        }
    ),
    "generation_step": _object(
        {
            "step": {"type": "integer", "minimum": 0},
            "token_original": INT,
            "token_rewritten": INT,
            "same_token": BOOL,
            "logits": {"$ref": "#/$defs/tensor_comparison"},
            "judged": BOOL,
            "agree": BOOL,
            "margin": {"$ref": "#/$defs/float"},
        }
    ),
    # float original vs its QDQ form with --intermediate (quantgraph.validation.debug.debugger)
    "debug": _object(
        {
            "tensors": _array({"$ref": "#/$defs/quantized_tensor"}),
            "nodes": _array({"$ref": "#/$defs/quantized_node"}),
            "nodes_error": {"type": ["string", "null"]},
            "worst": _array(
                _object(
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
                    _array(
                        _object(
                            {
                                "kind": {"enum": ["chain", "weights"]},
                                "name": STRING,
                                "names": _array(STRING),
                                "op_type": STRING,
                                "label": STRING,
                                "sqnr_db": {"type": ["number", "null"]},
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
    "quantized_tensor": _object(
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
            "observed_range": {"oneOf": [{"type": "null"}, _array({"type": "number"})]},
            "representable_range": _array({"type": "number"}),
            "clipped_low": {"type": "number"},
            "clipped_high": {"type": "number"},
            "rounded_to_zero": {"type": "number"},
            "levels": {"type": "number"},
            "sqnr_db": {"type": ["number", "null"]},
            "reason": REASON,
        }
    ),
    "quantized_node": _object(
        {
            "node": STRING,
            "op_type": STRING,
            "output": STRING,
            "constants": _array(STRING),
            "weight_levels": {"type": ["number", "null"]},
            "sqnr_db": {"type": ["number", "null"]},
            "reason": REASON,
        }
    ),
    "error_stats": _object(
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
    "fusion_unit": _object(
        {
            "compute": STRING,
            "op_type": STRING,
            "nodes": _array(STRING),
            "engine": STRING,
            "kernel": STRING,
            "graph": STRING,
            "reason": STRING,
        }
    ),
    "fusion_alone": _object({"node": STRING, "op_type": STRING, "reason": STRING, "graph": STRING}),
    "fusion_plan": _object(
        {
            "mode": {"enum": ["none", "onnxruntime", "onednn", "auto"]},
            "fused_spec_ops": INT,
            "spec_ops_alone": INT,
            "units": _array({"$ref": "#/$defs/fusion_unit"}),
            "alone": _array({"$ref": "#/$defs/fusion_alone"}),
            "no_unit": NULLABLE_STRING,  # why a requested fusion formed no unit
            "tuning": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/tuning"}]},
        }
    ),
    "tuning": _object(
        {
            "chosen": STRING,
            "source": {"enum": ["measured", "cache", "no partition", "not measured", "pending"]},
            "why": STRING,
            "candidates": _array(
                _object(
                    {
                        "name": STRING,
                        "to_onednn": _array(STRING),
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
    "model_timing": _object(
        {
            "label": STRING,
            "process_medians_ms": _array({"type": "number"}),
            "ratios": _array({"type": "number"}),
            "error": NULLABLE_STRING,
            "inputs": INPUTS,
            "plan": NULLABLE_STRING,  # fusion auto's decision in the variant's first process
            "median_ms": {"type": ["number", "null"]},
            "ratio_to_original": {"type": ["number", "null"]},
            "ratio_quartiles": QUARTILES,
        }
    ),
    "node_support": _object(
        {
            "node": STRING,
            "op": STRING,
            "status": {"enum": ["runs", "refused", "unknown"]},
            "reason": STRING,
        }
    ),
    "output_summary": _object(
        {
            "name": STRING,
            "dtype": STRING,
            "shape": SHAPE,
            "min": {"type": ["number", "boolean", "null"]},
            "max": {"type": ["number", "boolean", "null"]},
        }
    ),
    "bench_row": _object(
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

_REWRITE: dict[str, Schema] = {
    "converted": COUNTS,
    "emitted": COUNTS,
    "skipped": _array({"$ref": "#/$defs/skipped_node"}),
    "nodes": _array({"$ref": "#/$defs/converted_node"}),
    "other_quantized": _array({"$ref": "#/$defs/other_quantized_node"}),
    "already": COUNTS,
    "unchecked": COUNTS,
}

_TOP: dict[str, tuple[str, Schema]] = {
    "convert": (
        "quantgraph convert --json: the rewrite, OUT (absent under --dry-run) and, with "
        "--validate, the validation.",
        _object(_REWRITE, {"output": STRING, "validation": {"$ref": "#/$defs/validation"}}),
    ),
    "lower": (
        "quantgraph lower --json: spec ops rewritten back into QuantizeLinear/DequantizeLinear.",
        _object({**_REWRITE, "output": STRING}),
    ),
    "validate": (
        "quantgraph validate --json: the comparison of ORIGINAL and REWRITTEN.",
        {"$ref": "#/$defs/validation"},
    ),
    "run": (
        "quantgraph run --json: the backend and a summary of every output.",
        _object(
            {
                "backend": {"enum": ["native", "python", "onednn"]},
                "arithmetic": {"enum": ["onnx", "onednn"]},
                "onednn": {"$ref": "#/$defs/onednn"},
                "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
                "outputs": _array({"$ref": "#/$defs/output_summary"}),
                "output_file": NULLABLE_STRING,
                "seed": {"type": ["integer", "null"]},
                "inputs": INPUTS,
            }
        ),
    ),
    "inspect": (
        "quantgraph inspect --json: what convert would rewrite and, with --backend, which spec "
        "nodes that backend runs.",
        _object(
            _REWRITE,
            {
                "backend_support": _object(
                    {
                        "backend": {"enum": ["native", "python", "onednn"]},
                        "onednn": {"$ref": "#/$defs/onednn"},
                        "nodes": _array({"$ref": "#/$defs/node_support"}),
                    }
                ),
                "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
            },
        ),
    ),
    "bench": (
        "quantgraph bench --json: one row per op, layout and size (an array); with --model, "
        "one row per variant of the whole models.",
        {
            "anyOf": [
                _array({"$ref": "#/$defs/bench_row"}),
                _array({"$ref": "#/$defs/model_timing"}),
            ]
        },
    ),
    "tune": (
        "quantgraph tune --json: fusion auto's measured decision for MODEL on this CPU.",
        _object(
            {
                "model": STRING,
                "backend": {"enum": ["native", "python", "onednn"]},
                "arithmetic": {"enum": ["onnx", "onednn"]},
                "threads": INT,
                "inputs": {"type": "object"},
                "tuning": {"$ref": "#/$defs/tuning"},
                "fusion_plan": {"$ref": "#/$defs/fusion_plan"},
            }
        ),
    ),
    "fallback": (
        "quantgraph fallback --json: the float fallback found for QUANTIZED, every point on "
        "the way, the ranking it started from, and OUT.",
        _object(
            {
                "target": {"type": "number"},
                "higher_is_better": BOOL,
                "reached": BOOL,
                "kept": _array({"$ref": "#/$defs/fallback_candidate"}),
                "quality": {"type": ["number", "null"]},
                "evaluations": INT,
                "stopped": NULLABLE_STRING,
                "points": _array({"$ref": "#/$defs/fallback_point"}),
                "metric": STRING,
                "baseline": {"$ref": "#/$defs/fallback_point"},
                "ranking": _array({"$ref": "#/$defs/fallback_candidate"}),
                "runner": STRING,
                "notes": _array(STRING),
                "output": STRING,
            }
        ),
    ),
    "error": (
        "Any command's --json output when it fails (exit code 2; the same message is on stderr).",
        _object({"error": STRING, "exit_code": {"type": "integer", "minimum": 1}}),
    ),
}


def schema(command: str) -> Schema:
    """The JSON Schema of ``command``'s --json output ("error": of any command's failure)."""
    if command not in _TOP:
        raise KeyError(f"no JSON schema for {command!r}; one of {', '.join(COMMANDS)}")
    title, body = _TOP[command]
    text = json.dumps(body)
    used = {name: DEFS[name] for name in _closure(text)}
    return {"$schema": DIALECT, "title": title, **body, **({"$defs": used} if used else {})}


def _closure(text: str) -> list[str]:
    """The $defs a schema's text refers to, directly or through other $defs, in DEFS order."""
    found: set[str] = set()
    pending = [text]
    while pending:
        current = pending.pop()
        for name in DEFS:
            if f'"#/$defs/{name}"' in current and name not in found:
                found.add(name)
                pending.append(json.dumps(DEFS[name]))
    return [name for name in DEFS if name in found]


def render(command: str) -> str:
    return json.dumps(schema(command), indent=2) + "\n"


def main(argv: list[str]) -> int:
    """``--write``: (re)write every ``<command>.json``; ``--check``: exit 1 if one is stale."""
    stale = (
        [c for c in COMMANDS if (HERE / f"{c}.json").read_text() != render(c)]
        if ("--check" in argv)
        else []
    )
    if "--write" in argv:
        for command in COMMANDS:
            (HERE / f"{command}.json").write_text(render(command))
    for command in stale:
        print(f"{HERE / command}.json is stale: run python -m quantgraph.schemas_json --write")
    return 1 if stale else 0
