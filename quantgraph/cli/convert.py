"""quantgraph convert: rewrite a model's Q/DQ nodes into quantgraph ops, optionally validating
the result."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import click

from ..progress import Bar, Status
from .args import (
    BackendArgs,
    ConversionArgs,
    InputArgs,
    OutputArgs,
    ToleranceArgs,
    ValidationArgs,
    parsed,
    refuse_given,
)
from .args.conversion import KEEP_CONTRIB_OPTION, static_option
from .args.output import EXTERNAL_DATA_OPTION, force_option, report_option
from .args.validation import VALIDATION_FIELDS, VALIDATION_OPTIONS, validate_arguments
from .process import EXIT_DISAGREE, errors_are_one_line, quiet_onnxruntime, validation_failed
from .render_json import JSON_OPTION, print_json
from .render_text import VERBOSE_OPTION, print_conversion, print_validation

# The options only --validate uses (refused without it: an ignored option is an error):
# validate's own, shared (args/validation.py), and the page of --report.
VALIDATE_OPTIONS = (*VALIDATION_FIELDS, "report_path")


@click.command()
@click.argument("model_in", metavar="IN", type=click.Path(dir_okay=True, path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path), required=False)
@static_option(planning=False)
@click.option(
    "--validate",
    "validate_result",
    is_flag=True,
    help="Run original and rewritten model on the same inputs and compare, as validate does "
    "(the options from --inputs to --fusion are validate's, with the same meaning and rules).",
)
@VALIDATION_OPTIONS
@EXTERNAL_DATA_OPTION
@KEEP_CONTRIB_OPTION
@click.option(
    "--keep-float",
    "keep_float",
    metavar="NAME,...",
    multiple=True,
    help="Keep these tensors (or nodes) in float: remove their Q->DQ pairs from IN before "
    "converting (validate --sensitivity suggests which). Repeat it or separate names with "
    "commas: every name given counts. A node with quantized weights needs --float-model.",
)
@click.option(
    "--float-model",
    "float_model",
    metavar="FLOAT",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The float model IN was quantized from: the nodes --keep-float names take their "
    "weights from it (node names match, as quantizers keep them).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show what would change; write nothing (with --validate: validate the result in memory).",
)
@force_option("OUT")
@report_option(with_validate=True)
@VERBOSE_OPTION
@JSON_OPTION
@errors_are_one_line
@parsed(
    conversion=ConversionArgs,
    engine=BackendArgs,
    feeds=InputArgs,
    tolerance=ToleranceArgs,
    checks=ValidationArgs,
    out=OutputArgs,
)
def convert(
    model_in: Path,
    model_out: Path | None,
    validate_result: bool,
    keep_float: tuple[str, ...],
    float_model: Path | None,
    dry_run: bool,
    verbose: bool,
    as_json: bool,
    conversion: ConversionArgs,
    engine: BackendArgs,
    feeds: InputArgs,
    tolerance: ToleranceArgs,
    checks: ValidationArgs,
    out: OutputArgs,
) -> None:
    """Rewrite IN's Q/DQ nodes into quantgraph ops and write OUT (atomically).

    IN is never modified. Nodes the spec cannot express (int32 bias dequantize, int16, blocked
    QuantizeLinear, ...) are kept and listed with the reason. validate's options (--inputs,
    --backend, --arithmetic, --seed, --iterations, --memory-budget, --search-timeout, --dim,
    --val-range, --intermediate, --optimized, --generate, --prompt-tokens, --atol, --rtol,
    --fusion) and --report apply with --validate only.
    """
    from ..converter import convert as run_convert
    from ..ir.model_files import ModelLike, has_external_data

    if model_out is None and not dry_run:
        raise click.UsageError("OUT is required unless --dry-run is given")
    if not validate_result:
        refuse_given(VALIDATE_OPTIONS, "only with --validate")
    if not keep_float:
        refuse_given(("float_model",), "only with --keep-float")
    protected = (model_in, *feeds.inputs, *([float_model] if float_model is not None else []))
    if model_out is not None and not dry_run:
        out.check(model_out, protect=protected)
    out.check_report(protect=protected, out=None if dry_run else model_out)
    with Bar("rewriting Q/DQ nodes", quiet=as_json, command="convert") as progress:
        result = run_convert(
            model_in,
            static=conversion.static,
            contrib=conversion.contrib,
            progress=progress,
            keep_float=_names(keep_float),
            float_model=float_model,
        )
    # 100k converted nodes take a second to list: only --json prints them
    rewrite_report = result.report
    payload: dict[str, Any] = rewrite_report.to_dict() if as_json else {}
    validation = None
    if validate_result and not dry_run:  # the models' word on the options, before writing
        from ..validation import (
            check_generation,
            check_input_options,
            check_tolerance,
            input_samples,
        )

        original = result.original()
        if feeds.inputs:
            input_samples(list(feeds.inputs), original)
        check_input_options(original, dims=feeds.dims, val_ranges=feeds.val_ranges)
        check_tolerance(
            original,
            result.model,
            engine.backend,
            engine.arithmetic,
            engine.fusion,
            checks.optimized,
            tolerance.atol,
            tolerance.rtol,
            tolerance.min_sqnr,
        )
        check_generation(original, checks.generate, checks.prompt_tokens, str(model_in))
    if not dry_run:
        assert model_out is not None
        result.save(model_out, external_data=out.external_data, force=out.force)
        payload["output"] = str(model_out)
    if validate_result:
        from ..validation import validate as run_validate

        quiet_onnxruntime()
        # What is in memory, unless its weights live on disk (then OUT beside them; under
        # --dry-run the model, whose weights are read from IN's files).
        rewritten: ModelLike
        if has_external_data(result.model):  # never serialized whole: its weights stay out
            rewritten = result.model if dry_run or model_out is None else model_out
        else:
            rewritten = result.proto
        original = result.original()
        if rewritten is model_out:
            # Validated from OUT's files: the converted weights held in memory go first (a
            # model's graph is a cycle of nodes and values, freed by a collection).
            del result
            gc.collect()
        with Status("validating", quiet=as_json) as status:
            try:
                validation = run_validate(
                    original,
                    rewritten,
                    **validate_arguments(feeds, engine, tolerance, checks),
                    progress=status.validation,
                )
            except Exception as error:
                if dry_run or model_out is None:
                    raise
                raise validation_failed(error, status.stage, model_in, model_out) from error
        payload["validation"] = validation.to_dict()
        if out.report_path is not None:
            from ..validation.page.html_page import write_page

            write_page(
                out.report_path,
                validation,
                model_in,
                model_out or model_in,
                force=out.force,
                conversion=rewrite_report,
            )
    if as_json:
        print_json(payload)
    else:
        print_conversion(rewrite_report, dry_run, model_out, verbose=verbose)
        if validation is not None:
            print_validation(validation)
        if out.report_path is not None and validation is not None:
            click.echo(f"wrote {out.report_path}")
    if validation is not None and not validation.agree:
        if not as_json:
            click.echo(f"{model_out} was written and is kept, although the models disagree")
        sys.exit(EXIT_DISAGREE)


def _names(given: tuple[str, ...]) -> list[str]:
    """Every name of a repeated NAME,... option, in order, each once."""
    names = (name.strip() for text in given for name in text.split(","))
    return list(dict.fromkeys(name for name in names if name))
