"""quantgraph run: run a model (which may use quantgraph ops) and summarize its outputs."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import Status
from .args import BackendArgs, InputArgs, OutputArgs, parsed
from .args.backend import BACKEND_OPTIONS, FUSION_OPTION
from .args.inputs import (
    DIM_OPTION,
    MEMORY_BUDGET_OPTION,
    SEARCH_TIMEOUT_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    inputs_option,
)
from .args.output import OUTPUT_OPTION, force_option
from .process import errors_are_one_line, quiet_onnxruntime
from .render_json import JSON_OPTION, print_json
from .render_text import VERBOSE_OPTION, describe, print_generated, print_outputs, print_plan


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@inputs_option("sample")
@OUTPUT_OPTION
@force_option("--output")
@BACKEND_OPTIONS
@SEED_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@MEMORY_BUDGET_OPTION
@SEARCH_TIMEOUT_OPTION
@FUSION_OPTION
@VERBOSE_OPTION
@JSON_OPTION
@errors_are_one_line
@parsed(feeds=InputArgs, out=OutputArgs, engine=BackendArgs)
def run(
    model: Path,
    verbose: bool,
    as_json: bool,
    feeds: InputArgs,
    out: OutputArgs,
    engine: BackendArgs,
) -> None:
    """Run MODEL (which may use quantgraph ops) in onnxruntime and summarize its outputs.

    Without --inputs, inputs are generated as validate generates them: the first plan MODEL
    runs with finite outputs (--dim, --val-range, --seed, --memory-budget, --search-timeout).
    With --fusion, the plan is summed up one line per engine (--verbose: every unit).
    """
    from ..runtime.session import InferenceSession
    from ..validation import generate, load_inputs
    from ..validation.inputs.feeds import described_given

    quiet_onnxruntime()
    inputs_and_model = (model, *feeds.inputs)
    if out.output is not None:
        out.check(out.output, protect=inputs_and_model, role="--output")
    status = Status("run", quiet=as_json)
    with status:
        status.step("load", f"loading {model}")
        session = InferenceSession(
            model, engine.backend, arithmetic=engine.arithmetic, fusion=engine.fusion
        )
    feeds_file = feeds.file
    names = [o.name for o in session.get_outputs()]
    decided = session.fusion_plan.tuning
    pending = decided is not None and decided.source == "pending"
    inputs: dict[str, dict[str, object]]
    with status:
        status.step("run", "running (fusion auto decides its plan first)" if pending else "running")
        if feeds_file:
            arrays = load_inputs(feeds_file, model)
            inputs = described_given(arrays)
            results = list(session.run(names, arrays))
        else:  # said on stderr: the outputs describe these inputs, which nobody chose
            found = generate(
                model,
                run=lambda sample: list(session.run(names, dict(sample))),
                outputs=names,
                seed=feeds.seed,
                dims=feeds.dims,
                val_ranges=feeds.val_ranges,
                memory_budget=feeds.memory_budget,
                search_timeout=feeds.search_timeout,
            )
            results, inputs = found.outputs, found.inputs
    if not feeds_file and not as_json:
        print_generated(inputs, feeds.seed)
    if out.output is not None:
        from ..ir.output_files import write_npz

        write_npz(
            out.output,
            dict(zip(names, results, strict=True)),
            force=out.force,
            protect=inputs_and_model,
            role="--output",
        )
    summary = [describe(name, value) for name, value in zip(names, results, strict=True)]
    if as_json:
        print_json(
            {
                "backend": session.backend,
                "arithmetic": session.arithmetic,
                "onednn": session.onednn_version,
                "fusion_plan": session.fusion_plan.to_dict(),
                "outputs": summary,
                "output_file": str(out.output) if out.output else None,
                "seed": None if feeds_file else feeds.seed,
                "inputs": inputs,
            }
        )
        return
    engine_text = f", {session.onednn_version}" if session.onednn_version else ""
    click.echo(f"backend: {session.backend} ({session.arithmetic} arithmetic{engine_text})")
    if engine.fusion != "none":
        print_plan(session.fusion_plan, verbose=verbose)
    print_outputs(summary)
