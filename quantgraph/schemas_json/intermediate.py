"""validate --intermediate: every tensor both models compute, the first that diverges, and each
oneDNN partition run alone against the spec (the ``intermediate`` of validate's report)."""

from __future__ import annotations

from .common import INT, STRING, Schema, array_of, closed_object

DEFS: dict[str, Schema] = {
    "divergence": closed_object(
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
    "intermediate": closed_object(
        {
            "tensors_compared": INT,
            "tensors_differing": INT,
            "first_divergence": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/divergence"}]},
            "differing": array_of({"$ref": "#/$defs/tensor_comparison"}),
            "partitions": {
                "oneOf": [{"type": "null"}, array_of({"$ref": "#/$defs/partition_check"})]
            },
            "first_partition_divergence": {
                "oneOf": [{"type": "null"}, {"$ref": "#/$defs/partition_divergence"}]
            },
        }
    ),
    # one oneDNN partition run alone on the spec composition's inputs (validate --intermediate)
    "partition_check": closed_object(
        {
            "node": STRING,
            "compute": STRING,
            "kernel": STRING,
            "reason": STRING,
            "note": STRING,
            "introduced_steps": {"type": ["number", "null"]},
            "inherited_steps": {"type": ["number", "null"]},
            "outputs": array_of({"$ref": "#/$defs/partition_output"}),
        }
    ),
    "partition_output": closed_object(
        {
            "name": STRING,
            "step": {"type": ["number", "null"]},
            "introduced": {"$ref": "#/$defs/tensor_comparison"},
            "introduced_steps": {"type": ["number", "null"]},
            "inherited": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/tensor_comparison"}]},
            "inherited_steps": {"type": ["number", "null"]},
        }
    ),
    "partition_divergence": closed_object(
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
}
