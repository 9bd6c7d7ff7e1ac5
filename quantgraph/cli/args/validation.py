"""Validation: what `validate` compares and how (--intermediate, --optimized), and the one stack
of every option a validation takes, which `validate` and `convert --validate` share: the same
flags, the same meaning, the same rules (their groups' parsing), and one mapping onto
quantgraph.validation.validate's arguments."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from .backend import BACKEND_OPTIONS, FUSION_OPTION, BackendArgs
from .base import ArgGroup, group_option, stacked
from .inputs import (
    DIM_OPTION,
    ITERATIONS_OPTION,
    MEMORY_BUDGET_OPTION,
    SEARCH_TIMEOUT_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    InputArgs,
    inputs_option,
)
from .tolerance import TOLERANCE_OPTIONS, ToleranceArgs

OWNER = "ValidationArgs"
# quantgraph.validation.debug.debugger's (the CLI does not import onnxruntime).
DEFAULT_SENSITIVITY = 5
# quantgraph.validation.generation.greedy's (tests/test_generation.py checks they agree).
DEFAULT_STEPS = 8
DEFAULT_PROMPT_TOKENS = 16

VALIDATION_OPTIONS = stacked(
    inputs_option("samples"),
    BACKEND_OPTIONS,
    SEED_OPTION,
    ITERATIONS_OPTION,
    MEMORY_BUDGET_OPTION,
    SEARCH_TIMEOUT_OPTION,
    DIM_OPTION,
    VAL_RANGE_OPTION,
    group_option(
        OWNER,
        "--intermediate",
        is_flag=True,
        help="Also compare every tensor both models compute under one name and report the "
        "first node whose output differs.",
    ),
    group_option(
        OWNER,
        "--optimized",
        is_flag=True,
        help="Also compare against the original at ORT_ENABLE_ALL (fused integer kernels; not "
        "expected to be exact: judged by --atol/--rtol, not part of the verdict).",
    ),
    group_option(
        OWNER,
        "--sensitivity",
        type=click.IntRange(min=1),
        is_flag=False,
        flag_value=DEFAULT_SENSITIVITY,
        default=None,
        metavar="[K]",
        help="Float original vs its QDQ form: rerun with each of the K worst quantized tensors "
        f"(by the error they introduce) kept in float and rank the output SQNR gained (K "
        f"{DEFAULT_SENSITIVITY} when given alone; implies --intermediate).",
    ),
    group_option(
        OWNER,
        "--generate",
        "generate",
        type=click.IntRange(min=0),
        default=None,
        metavar="N",
        help="A decoder (input_ids, logits, a KV cache): also generate greedily on both models, "
        "the prefill then N steps each feeding back its own token and cache, and compare the "
        f"tokens and logits at every step (default {DEFAULT_STEPS} for a decoder; 0: none).",
    ),
    group_option(
        OWNER,
        "--prompt-tokens",
        "prompt_tokens",
        type=click.IntRange(min=1),
        default=None,
        metavar="P",
        help="The generation's prompt: P token ids drawn inside the vocabulary from --seed "
        f"(default {DEFAULT_PROMPT_TOKENS}; with the steps, at most the model's positions).",
    ),
    TOLERANCE_OPTIONS,
    FUSION_OPTION,
)


@dataclasses.dataclass(frozen=True)
class ValidationArgs(ArgGroup):
    intermediate: bool = False
    optimized: bool = False
    sensitivity: int | None = None
    generate: int | None = None
    prompt_tokens: int | None = None


# The parameters VALIDATION_OPTIONS declares (bench's --backends/--fusions are BackendArgs'
# too, but no validation's).
VALIDATION_FIELDS: tuple[str, ...] = (
    *InputArgs.fields(),
    "backend",
    "arithmetic",
    "fusion",
    *ToleranceArgs.fields(),
    *ValidationArgs.fields(),
)


def validate_arguments(
    feeds: InputArgs, engine: BackendArgs, tolerance: ToleranceArgs, checks: ValidationArgs
) -> dict[str, Any]:
    """quantgraph.validation.validate's keyword arguments from the parsed groups (the same
    call from every command)."""
    return {
        "inputs": list(feeds.inputs) or None,
        "backend": engine.backend,
        "arithmetic": engine.arithmetic,
        "seed": feeds.seed,
        "dims": feeds.dims,
        "val_ranges": feeds.val_ranges,
        "iterations": feeds.iterations,
        "memory_budget": feeds.memory_budget,
        "search_timeout": feeds.search_timeout,
        "intermediate": checks.intermediate,
        "optimized": checks.optimized,
        "sensitivity": checks.sensitivity,
        "generate": checks.generate,
        "prompt_tokens": checks.prompt_tokens,
        "atol": tolerance.atol,
        "rtol": tolerance.rtol,
        "min_sqnr": tolerance.min_sqnr,
        "fusion": engine.fusion,
    }
