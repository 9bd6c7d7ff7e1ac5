"""quantgraph run: run a model (which may use quantgraph ops) and summarize its outputs."""

from __future__ import annotations

from pathlib import Path

import click

from ..writing import check_output
from .common import bound_dims, bound_ranges, errors_are_one_line, print_json, quiet_onnxruntime
from .options import (
    ARITHMETIC_OPTION,
    BACKEND_OPTION,
    DIM_OPTION,
    FUSION_OPTION,
    GENERATION_OPTIONS,
    INPUTS_HELP,
    JSON_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    refuse_given,
)
from .render_text import describe, print_plan


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=f"{INPUTS_HELP}: one sample (validate takes several; default: generated from --seed).",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    help="Write the outputs to this .npz (never over MODEL or --inputs).",
)
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@BACKEND_OPTION
@ARITHMETIC_OPTION
@SEED_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def run(
    model: Path,
    inputs: Path | None,
    output: Path | None,
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    fusion: str,
    as_json: bool,
    force: bool,
) -> None:
    """Run MODEL (which may use quantgraph ops) in onnxruntime and summarize its outputs."""
    from ..session import InferenceSession
    from ..validation import load_inputs, make_inputs

    if inputs:
        refuse_given(GENERATION_OPTIONS, "only to generated inputs, not with --inputs")
    quiet_onnxruntime()
    bound, ranges = bound_dims(dims), bound_ranges(val_ranges)
    inputs_and_model = (model, *([inputs] if inputs else []))
    if output is not None:
        check_output(output, force=force, protect=inputs_and_model, role="--output")
    session = InferenceSession(model, backend, arithmetic=arithmetic, fusion=fusion)
    feeds = (
        load_inputs(inputs, model)
        if inputs
        else make_inputs(model, seed=seed, dims=bound, val_ranges=ranges)
    )
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    if output is not None:
        from ..writing import write_npz

        arrays = dict(zip(names, results, strict=True))
        write_npz(output, arrays, force=force, protect=inputs_and_model, role="--output")
    summary = [describe(name, value) for name, value in zip(names, results, strict=True)]
    if as_json:
        print_json(
            {
                "backend": session.backend,
                "arithmetic": session.arithmetic,
                "onednn": session.onednn_version,
                "fusion_plan": session.fusion_plan.to_dict(),
                "outputs": summary,
                "output_file": str(output) if output else None,
            }
        )
    else:
        engine = f", {session.onednn_version}" if session.onednn_version else ""
        click.echo(f"backend: {session.backend} ({session.arithmetic} arithmetic{engine})")
        if fusion != "none":
            print_plan(session.fusion_plan)
        for item in summary:
            click.echo(
                f"  {item['name']}: {item['dtype']}{item['shape']} "
                f"min {item['min']} max {item['max']}"
            )
