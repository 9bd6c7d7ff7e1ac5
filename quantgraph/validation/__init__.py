"""Validation: run the original and the rewritten model on inputs that make sense for them and
say how far they agree, output by output (and tensor by tensor)."""

from .early_checks import check_tolerance
from .generation.greedy import check_generation
from .inputs.generated import Generated, generate, make_inputs
from .inputs.plan import InputSpec, check_input_options, plan_inputs
from .inputs.search_report import InputSearch
from .options import InputOptionError, parse_dim, parse_val_range
from .report import EXACT, OPTIMIZED, Divergence, IntermediateReport, ValidationReport
from .run import input_samples, load_inputs, validate

__all__ = [
    "EXACT",
    "OPTIMIZED",
    "Divergence",
    "Generated",
    "InputOptionError",
    "InputSearch",
    "InputSpec",
    "IntermediateReport",
    "ValidationReport",
    "check_generation",
    "check_input_options",
    "check_tolerance",
    "generate",
    "input_samples",
    "load_inputs",
    "make_inputs",
    "parse_dim",
    "parse_val_range",
    "plan_inputs",
    "validate",
]
