"""quantgraph validate: run the original and the rewritten model on the same inputs and compare."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..progress import Status
from .common import (
    EXIT_DISAGREE,
    EXIT_OK,
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
    FUSION_OPTION,
    GENERATION_OPTIONS,
    INPUTS_HELP,
    ITERATIONS_OPTION,
    JSON_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    refuse_given,
)
from .render_text import print_validation


@click.command()
@click.argument("original", type=click.Path(path_type=Path))
@click.argument("rewritten", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help=f"{INPUTS_HELP}, or a directory of them; repeatable: each file is one sample "
    "(default: generated from --seed).",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@SEED_OPTION
@ITERATIONS_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@click.option(
    "--intermediate",
    is_flag=True,
    help="Also compare every tensor both models compute under one name and report the first "
    "node whose output differs.",
)
@click.option(
    "--optimized",
    is_flag=True,
    help="Also compare against the original at ORT_ENABLE_ALL (fused integer kernels; not "
    "expected to be exact: judged by --atol/--rtol, not part of the verdict).",
)
@click.option(
    "--atol",
    type=float,
    default=0.0,
    show_default=True,
    help="Absolute tolerance (--optimized; and the verdict when the rewritten side computes "
    "oneDNN's arithmetic).",
)
@click.option(
    "--rtol", type=float, default=0.0, show_default=True, help="Relative tolerance (as --atol)."
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the validation as one self-contained HTML page (charts, tables; opens "
    "offline). Replaced only with --force.",
)
@click.option("--force", is_flag=True, help="Replace the --report page if it exists.")
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def validate(
    original: Path,
    rewritten: Path,
    inputs: tuple[Path, ...],
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    iterations: int,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    intermediate: bool,
    optimized: bool,
    atol: float,
    rtol: float,
    report_path: Path | None,
    force: bool,
    fusion: str,
    as_json: bool,
) -> None:
    """Run ORIGINAL (at ORT_DISABLE_ALL) and REWRITTEN on the same inputs; compare outputs.

    Exit 0 when every output is identical, 1 when any differs, 2 on an error. With --fusion
    onnxruntime both run at ORT_ENABLE_ALL (still an exact comparison).

    \b
    Examples:
      quantgraph validate model.onnx out.onnx --iterations 5
      quantgraph validate det.onnx det_qg.onnx --dim height=640 --dim width=640
      quantgraph validate lm.onnx lm_qg.onnx --val-range input_ids:0,15
      quantgraph validate model.onnx out.onnx --inputs samples/ --intermediate --json
      quantgraph validate model.onnx out.onnx --optimized --atol 0.05
      quantgraph validate model.onnx out.onnx --intermediate --report report.html
      quantgraph validate float.onnx qdq.onnx --intermediate --report where-it-hurts.html
    """
    from ..validation import validate as run_validate

    if inputs:
        refuse_given(GENERATION_OPTIONS, "only to generated inputs, not with --inputs")
    quiet_onnxruntime()
    status = Status("validate", quiet=as_json)
    report = run_validate(
        original,
        rewritten,
        inputs=list(inputs) or None,
        backend=backend,
        arithmetic=arithmetic,
        seed=seed,
        dims=bound_dims(dims),
        val_ranges=bound_ranges(val_ranges),
        iterations=iterations,
        intermediate=intermediate,
        optimized=optimized,
        atol=atol,
        rtol=rtol,
        fusion=fusion,
        progress=status.validation,
    )
    status.close()
    if report_path is not None:
        from ..validation.html_page import write_page

        write_page(report_path, report, original, rewritten, force=force)
    if as_json:
        print_json(report.to_dict())
    else:
        print_validation(report)
        if report_path is not None:
            click.echo(f"wrote {report_path}")
    sys.exit(EXIT_OK if report.agree else EXIT_DISAGREE)
