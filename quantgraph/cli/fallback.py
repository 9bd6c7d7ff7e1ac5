"""quantgraph fallback: the smallest float fallback of a quantized model that reaches a target
output SQNR, priced in speed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..progress import Status
from .args import InputArgs, OutputArgs, parsed
from .args.inputs import DIM_OPTION, ITERATIONS_OPTION, SEED_OPTION, VAL_RANGE_OPTION, inputs_option
from .args.output import EXTERNAL_DATA_OPTION, force_option, report_option
from .process import EXIT_DISAGREE, EXIT_OK, errors_are_one_line, quiet_onnxruntime
from .render_json import JSON_OPTION, print_json


@click.command()
@click.argument("float_model", metavar="FLOAT", type=click.Path(path_type=Path))
@click.argument("quantized_model", metavar="QUANTIZED", type=click.Path(path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path))
@click.option(
    "--target-sqnr",
    type=float,
    required=True,
    metavar="DB",
    help="The output SQNR against FLOAT to reach, in dB (the worst output's, over the samples).",
)
@click.option(
    "--max-evaluations",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Full evaluations (a keep-float model run on every sample) the search may make.",
)
@inputs_option("samples")
@DIM_OPTION
@VAL_RANGE_OPTION
@SEED_OPTION
@ITERATIONS_OPTION
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Local worker processes for the evaluations (default: as many as the CPUs and the "
    "memory estimate allow; 1: in this process).",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Run the evaluations on a Ray cluster (ray://host:port, auto, or local to start one "
    "here; needs pip install 'quantgraph[ray]').",
)
@click.option("--no-price", is_flag=True, help="Do not time each point with fusion auto (faster).")
@EXTERNAL_DATA_OPTION
@report_option(with_validate=False)
@force_option("OUT")
@JSON_OPTION
@errors_are_one_line
@parsed(feeds=InputArgs, out=OutputArgs)
def fallback(
    float_model: Path,
    quantized_model: Path,
    model_out: Path,
    target_sqnr: float,
    max_evaluations: int,
    workers: int | None,
    ray_address: str | None,
    no_price: bool,
    as_json: bool,
    feeds: InputArgs,
    out: OutputArgs,
) -> None:
    """Find a small set of QUANTIZED's places to keep in float (Q/DQ chains, counted once
    with their aliases, and nodes' weights, taken from FLOAT) whose output SQNR against FLOAT
    reaches --target-sqnr, and write that model to OUT (QDQ, convertible like any other).

    Samples: --inputs, else generated as validate plans them (--iterations of them, 8 by
    default, from --seed).

    Exit 0 when the target is reached, 1 when it cannot be (OUT then holds the best found),
    2 on an error. Every point on the way is timed with fusion auto (--report draws the Pareto
    front of quality against kept count and latency).

    \b
    Examples:
      quantgraph fallback float.onnx qdq.onnx mixed.onnx --target-sqnr 30
      quantgraph fallback float.onnx qdq.onnx mixed.onnx --target-sqnr 30 --report front.html
      quantgraph fallback float.onnx qdq.onnx mixed.onnx --target-sqnr 25 --ray auto --json
    """
    from ..float_fallback import fallback as find
    from ..validation import generate, input_samples

    protect = (float_model, quantized_model, *feeds.inputs)
    out.check(model_out, protect=protect)
    out.check_report(protect=protect, out=model_out)
    quiet_onnxruntime()
    status = Status("fallback", quiet=as_json)

    def progress(stage: str, done: int, total: int) -> None:
        status.step(stage, f"{stage} {done}/{total}")

    if feeds.inputs:
        data = input_samples(list(feeds.inputs), float_model)
    else:  # one plan as validate makes it, --iterations draws from --seed on (as the API)
        data = generate(
            float_model,
            seed=feeds.seed,
            dims=feeds.dims,
            val_ranges=feeds.val_ranges,
            iterations=_samples(feeds.iterations),
        ).samples
    result = find(
        float_model,
        quantized_model,
        target=target_sqnr,
        data=data,
        max_evaluations=max_evaluations,
        workers=workers,
        ray_address=ray_address,
        price=not no_price,
        progress=progress,
    )
    status.close()
    result.save(model_out, external_data=out.external_data, force=out.force)
    if out.report_path is not None:
        labels = (str(float_model), str(quantized_model))
        result.write_html(out.report_path, labels=labels, force=out.force)
    payload: dict[str, Any] = {**result.to_dict(), "output": str(model_out)}
    if as_json:
        print_json(payload)
    else:
        _print(result, model_out, out.report_path)
    sys.exit(EXIT_OK if result.search.reached else EXIT_DISAGREE)


def _samples(iterations: int) -> int:
    """--iterations when given, else the fallback's default (8: one sample says little)."""
    from click.core import ParameterSource

    from ..float_fallback.find import DEFAULT_SAMPLES

    source = click.get_current_context().get_parameter_source("iterations")
    return iterations if source not in (None, ParameterSource.DEFAULT) else DEFAULT_SAMPLES


def _print(result: Any, model_out: Path, report: Path | None) -> None:
    search = result.search
    base = result.baseline
    click.echo(
        f"quantized as it is: {base.quality:.2f} dB"
        + ("" if base.ms is None else f", {base.ms:.3f} ms with fusion auto")
    )
    for point in search.pareto():
        ms = "" if point.ms is None else f", {point.ms:.3f} ms"
        names = ", ".join(sorted(point.kept)) or "nothing"
        click.echo(f"  {len(point.kept)} kept: {point.quality:.2f} dB{ms} ({names})")
    if search.reached:
        click.echo(
            f"target {search.target.value:g} dB reached with {len(search.kept)} kept in float: "
            f"{search.best.quality:.2f} dB ({search.evaluations} evaluations, {result.runner})"
        )
    else:
        click.echo(
            f"target {search.target.value:g} dB NOT reached in {search.evaluations} "
            f"evaluations: the best found is {search.best.quality:.2f} dB with "
            f"{len(search.best.kept)} kept in float (written to OUT)"
        )
    for candidate in result.kept:
        click.echo(f"  kept: {candidate.label}")
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(f"wrote {model_out}")
    if report is not None:
        click.echo(f"wrote {report}")
