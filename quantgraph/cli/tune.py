"""quantgraph tune: measure fusion "auto"'s candidate plans for a model on this CPU, ahead of
the sessions that will use the decision (they find it in the cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..progress import Status
from .args import BackendArgs, InputArgs, KernelArgs, parsed
from .args.backend import BACKEND_OPTIONS
from .args.inputs import (
    DIM_OPTION,
    MEMORY_BUDGET_OPTION,
    SEARCH_TIMEOUT_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    inputs_option,
)
from .args.kernels import THREADS_OPTION
from .process import errors_are_one_line, quiet_onnxruntime
from .render_json import JSON_OPTION, print_json
from .render_text import print_generated, print_tuning


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@inputs_option("sample")
@BACKEND_OPTIONS
@SEED_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@MEMORY_BUDGET_OPTION
@SEARCH_TIMEOUT_OPTION
@THREADS_OPTION
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to time the candidate plans, all together (at least 3 rounds are timed).",
)
@click.option(
    "--again", is_flag=True, help="Measure again even where the cache holds a fresh decision."
)
@JSON_OPTION
@errors_are_one_line
@parsed(feeds=InputArgs, engine=BackendArgs, session=KernelArgs)
def tune(
    model: Path,
    budget: float,
    again: bool,
    as_json: bool,
    feeds: InputArgs,
    engine: BackendArgs,
    session: KernelArgs,
) -> None:
    """Measure fusion "auto"'s candidate plans for MODEL (a model with quantgraph's ops) on
    this CPU at the inputs' shapes, keep the fastest in the cache, and say why.

    A session with fusion "auto" on the same model, backend, threads and input shapes then
    finds the decision instead of measuring (at other shapes it measures); a decision older
    than $QUANTGRAPH_TUNING_MAX_AGE days (30) is measured again. Inputs: --inputs FILE, else
    generated as validate generates them (--dim, --val-range, --seed, --memory-budget,
    --search-timeout).
    """
    import onnxruntime as ort

    from ..errors import ModelError
    from ..ir.model_files import load_model
    from ..ir.walk import all_graphs, spec_op
    from ..runtime.session import InferenceSession
    from ..validation import generate, load_inputs

    quiet_onnxruntime()
    loaded = load_model(model)
    if not any(spec_op(n) is not None for g in all_graphs(loaded) for n in g):
        raise ModelError(
            f"{model}: holds no quantgraph spec ops: tune the rewritten model "
            "(quantgraph convert IN OUT, then quantgraph tune OUT)"
        )
    inputs: dict[str, dict[str, Any]]
    if feeds.file:
        arrays = load_inputs(feeds.file, loaded)
        inputs = {n: {"dtype": str(a.dtype), "shape": list(a.shape)} for n, a in arrays.items()}
    else:
        found = generate(
            loaded,
            label=str(model),
            seed=feeds.seed,
            dims=feeds.dims,
            val_ranges=feeds.val_ranges,
            memory_budget=feeds.memory_budget,
            search_timeout=feeds.search_timeout,
        )
        arrays, inputs = found.samples[0], found.inputs
        if not as_json:
            print_generated(inputs, feeds.seed)
    options = ort.SessionOptions()
    threads = session.threads  # decisions are cached per thread count
    options.intra_op_num_threads = threads
    with Status("tune", quiet=as_json) as status:
        # the tuner reports nothing while it measures: the status line's clock says it works
        status.step("measure", f"measuring fusion auto's candidate plans (--budget {budget:g} s)")
        tuned = InferenceSession(
            model,
            engine.backend,
            arithmetic=engine.arithmetic,
            options=options,
            fusion="auto",
            tune_inputs=arrays,
            tuning="force" if again else "measure",
            tuning_budget=budget,
        )
    decision = tuned.fusion_plan.tuning
    if as_json:
        print_json(
            {
                "model": str(model),
                "backend": tuned.backend,
                "arithmetic": tuned.arithmetic,
                "threads": threads,
                "inputs": inputs,
                "tuning": decision.to_dict(),
                "fusion_plan": tuned.fusion_plan.to_dict(),
            }
        )
        return
    print_tuning(decision)
