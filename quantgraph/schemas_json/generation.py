"""A decoder original: the greedy generation on both models (the ``generation`` of validate's
report; quantgraph.validation.generation.greedy)."""

from __future__ import annotations

from .common import BOOL, INT, NULLABLE_STRING, STRING, Schema, array_of, closed_object

DEFS: dict[str, Schema] = {
    "generation": closed_object(
        {
            "agree": BOOL,
            "skipped": NULLABLE_STRING,
            "note": STRING,
            "capped": NULLABLE_STRING,
            "seed": INT,
            "prompt_tokens": {"type": "integer", "minimum": 0},
            "prompt": array_of(INT),
            "steps_run": {"type": "integer", "minimum": 0},
            "exact_expected": BOOL,
            "atol": {"type": ["number", "null"]},
            "rtol": {"type": ["number", "null"]},
            "tokens_original": array_of(INT),
            "tokens_rewritten": array_of(INT),
            "same_tokens": {"type": "integer", "minimum": 0},
            "first_divergence": {"type": ["integer", "null"]},
            "first_failing": {"type": ["integer", "null"]},
            "logits_max_abs_diff": {"$ref": "#/$defs/float"},
            "verdict": STRING,
            "steps": array_of({"$ref": "#/$defs/generation_step"}),
        }
    ),
    "generation_step": closed_object(
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
}
