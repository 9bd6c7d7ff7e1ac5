"""quantgraph validate: run the original and the rewritten model on the same inputs and compare."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..progress import Status
from .args import BackendArgs, InputArgs, OutputArgs, ToleranceArgs, ValidationArgs, parsed
from .args.output import force_option, report_option
from .args.validation import VALIDATION_OPTIONS, validate_arguments
from .process import EXIT_DISAGREE, EXIT_OK, errors_are_one_line, quiet_onnxruntime
from .render_json import JSON_OPTION, print_json
from .render_text import print_validation


@click.command()
@click.argument("original", type=click.Path(path_type=Path))
@click.argument("rewritten", type=click.Path(path_type=Path))
@VALIDATION_OPTIONS
@report_option(with_validate=False)
@force_option("--report")
@JSON_OPTION
@errors_are_one_line
@parsed(
    feeds=InputArgs,
    engine=BackendArgs,
    tolerance=ToleranceArgs,
    checks=ValidationArgs,
    out=OutputArgs,
)
def validate(
    original: Path,
    rewritten: Path,
    as_json: bool,
    feeds: InputArgs,
    engine: BackendArgs,
    tolerance: ToleranceArgs,
    checks: ValidationArgs,
    out: OutputArgs,
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

    out.check_report(protect=(original, rewritten, *feeds.inputs))  # before any work
    quiet_onnxruntime()
    with Status("validate", quiet=as_json) as status:
        report = run_validate(
            original,
            rewritten,
            **validate_arguments(feeds, engine, tolerance, checks),
            progress=status.validation,
        )
    if out.report_path is not None:
        report.write_html(out.report_path, force=out.force)
    if as_json:
        print_json(report.to_dict())
    else:
        print_validation(report)
        if out.report_path is not None:
            click.echo(f"wrote {out.report_path}")
    sys.exit(EXIT_OK if report.agree else EXIT_DISAGREE)
