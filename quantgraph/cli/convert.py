"""quantgraph convert: rewrite a model's Q/DQ nodes into quantgraph ops, optionally validating
the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..progress import Bar, Status
from ..writing import check_output
from .common import (
    EXIT_DISAGREE,
    bound_dims,
    bound_ranges,
    errors_are_one_line,
    print_json,
    quiet_onnxruntime,
)
from .options import (
    ARITHMETIC_OPTION,
    BACKEND_OPTION,
    DIM_OPTION,
    ITERATIONS_OPTION,
    JSON_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    VALIDATE_OPTIONS,
    refuse_given,
)
from .process import validation_failed
from .render_text import print_conversion, print_validation


@click.command()
@click.argument("model_in", metavar="IN", type=click.Path(dir_okay=True, path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path), required=False)
@click.option(
    "--static",
    is_flag=True,
    help="Emit static Quantize/Dequantize (scales/zps attributes) where scale and "
    "zero point are constants.",
)
@click.option(
    "--validate",
    "validate_result",
    is_flag=True,
    help="Run original and rewritten model on the same random inputs and compare.",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option(
    "--external-data",
    default="auto",
    show_default=True,
    metavar="auto|none|FILE",
    help="Where OUT's weights go: auto keeps IN's layout (external weights go to OUT.data), "
    "none writes them into OUT, FILE names the external-data file beside OUT.",
)
@click.option(
    "--keep-contrib",
    is_flag=True,
    help="Leave com.microsoft QuantizeLinear/DequantizeLinear unchanged (listed).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show what would change; write nothing (with --validate: validate the result in memory).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@DIM_OPTION
@VAL_RANGE_OPTION
@SEED_OPTION
@ITERATIONS_OPTION
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the validation as one self-contained HTML page (charts, tables; opens "
    "offline). With --validate; replaced only with --force.",
)
@JSON_OPTION
@errors_are_one_line
def convert(
    model_in: Path,
    model_out: Path | None,
    static: bool,
    validate_result: bool,
    backend: str | None,
    arithmetic: str | None,
    external_data: str,
    keep_contrib: bool,
    dry_run: bool,
    force: bool,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    seed: int,
    iterations: int,
    report_path: Path | None,
    as_json: bool,
) -> None:
    """Rewrite IN's Q/DQ nodes into quantgraph ops and write OUT (atomically).

    IN is never modified. Nodes the spec cannot express (int32 bias dequantize, int16, blocked
    QuantizeLinear, ...) are kept and listed with the reason. --backend, --arithmetic, --dim,
    --val-range, --seed and --iterations are --validate's options.
    """
    from ..converter import convert as run_convert
    from ..io import ModelLike, has_external_data

    if model_out is None and not dry_run:
        raise click.UsageError("OUT is required unless --dry-run is given")
    if not validate_result:
        refuse_given(VALIDATE_OPTIONS, "only with --validate")
    bound = bound_dims(dims)  # a bad --dim or --val-range fails before anything is written
    ranges = bound_ranges(val_ranges)
    if model_out is not None and not dry_run:
        check_output(model_out, force=force, protect=(model_in,), external_data=external_data)
    with Bar("rewriting Q/DQ nodes", quiet=as_json) as progress:
        result = run_convert(model_in, static=static, contrib=not keep_contrib, progress=progress)
    payload: dict[str, Any] = result.report.to_dict()
    validation = None
    if validate_result and not dry_run:  # the model's word on --dim/--val-range, before writing
        from ..validation import check_input_options

        check_input_options(result.original(), dims=bound, val_ranges=ranges)
    if not dry_run:
        assert model_out is not None
        result.save(model_out, external_data=external_data, force=force)
        payload["output"] = str(model_out)
    if validate_result:
        from ..validation import validate as run_validate

        quiet_onnxruntime()
        # What is in memory, unless its weights live on disk (then OUT beside them; under
        # --dry-run the model, whose weights are read from IN's files).
        rewritten: ModelLike = result.proto
        if has_external_data(result.model):
            rewritten = result.model if dry_run or model_out is None else model_out
        with Status("validating", quiet=as_json) as status:
            try:
                validation = run_validate(
                    result.original(),
                    rewritten,
                    backend=backend,
                    arithmetic=arithmetic,
                    seed=seed,
                    dims=bound,
                    val_ranges=ranges,
                    iterations=iterations,
                    progress=status.validation,
                )
            except Exception as error:
                if dry_run or model_out is None:
                    raise
                raise validation_failed(error, status.stage, model_in, model_out) from error
        payload["validation"] = validation.to_dict()
        if report_path is not None:
            from ..validation.html_page import write_page

            write_page(
                report_path,
                validation,
                model_in,
                model_out or model_in,
                force=force,
                conversion=result.report,
            )
    if as_json:
        print_json(payload)
    else:
        print_conversion(result.report, dry_run, model_out)
        if validation is not None:
            print_validation(validation)
        if report_path is not None and validation is not None:
            click.echo(f"wrote {report_path}")
    if validation is not None and not validation.agree:
        if not as_json:
            click.echo(f"{model_out} was written and is kept, although the models disagree")
        sys.exit(EXIT_DISAGREE)
