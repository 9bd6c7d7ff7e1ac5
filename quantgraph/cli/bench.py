"""quantgraph bench: the kernels against onnxruntime's Q/DQ, numpy and np.copyto, or (with
--model) whole models, each variant in its own process."""

from __future__ import annotations

import click

from ..ir.name_groups import described_once
from ..progress import Status
from .args import BackendArgs, InputArgs, KernelArgs, ModelTimingArgs, parsed
from .args.backend import BENCH_LIST_OPTIONS
from .args.inputs import (
    DIM_OPTION,
    MEMORY_BUDGET_OPTION,
    SEARCH_TIMEOUT_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    inputs_option,
)
from .args.kernels import KERNEL_OPTIONS
from .args.model_timing import MODEL_TIMING_OPTIONS
from .process import errors_are_one_line
from .render_json import JSON_OPTION, print_json


@click.command()
@KERNEL_OPTIONS
@MODEL_TIMING_OPTIONS
@BENCH_LIST_OPTIONS
@inputs_option("bench")
@DIM_OPTION
@VAL_RANGE_OPTION
@SEED_OPTION
@MEMORY_BUDGET_OPTION
@SEARCH_TIMEOUT_OPTION
@JSON_OPTION
@errors_are_one_line
@parsed(kernels=KernelArgs, timing=ModelTimingArgs, engine=BackendArgs, feeds=InputArgs)
def bench(
    as_json: bool,
    kernels: KernelArgs,
    timing: ModelTimingArgs,
    engine: BackendArgs,
    feeds: InputArgs,
) -> None:
    """Time the kernels against onnxruntime's QuantizeLinear/DequantizeLinear, plain numpy and
    np.copyto, measured in the same run; or, with --model, whole models.

    \b
    Examples:
      quantgraph bench --sizes 1048576 --weights ''
      quantgraph bench --model model.onnx model_qg.onnx --fusions none,onnxruntime --rounds 7
      quantgraph bench --model lm.onnx lm_qg.onnx --dim batch=8 --dim sequence=128
      quantgraph bench --model det.onnx det_qg.onnx --inputs image.npz
    """
    if timing.models:
        _bench_models(timing, engine, kernels, feeds, as_json)
        return
    from ..bench import kernels as benchmarks

    narrow = tuple(f"{benchmarks.NARROW_PREFIX}{c}" for c in kernels.narrow_columns())
    # Text streams the table a row at a time (a full run takes minutes, also when piped), which
    # says more than progress lines would; --json prints one document at the end.
    if not as_json:
        click.echo(benchmarks.table_head(kernels.threads, not kernels.no_spinning))
    rows = benchmarks.run(
        sizes=kernels.sizes,
        repeat=kernels.repeat,
        layouts=(*benchmarks.LAYOUTS, *narrow),
        threads=kernels.threads,
        spinning=not kernels.no_spinning,
        weights=kernels.weights,
        on_row=None if as_json else lambda row: click.echo(benchmarks.table_row(row)),
    )
    if as_json:
        print_json([row.to_dict() for row in rows])
    elif notes := benchmarks.table_notes(rows):
        click.echo(f"\n{notes}")


def _bench_models(
    timing: ModelTimingArgs,
    engine: BackendArgs,
    kernels: KernelArgs,
    feeds: InputArgs,
    as_json: bool,
) -> None:
    from ..bench.models import bench_models
    from ..validation import load_inputs

    chosen, modes = engine.bench_lists()
    assert timing.models is not None
    original = timing.models[0]
    with Status("bench", quiet=as_json) as status:
        timings = bench_models(
            original,
            timing.models[1],
            backends=chosen,
            fusions=modes,
            rounds=timing.rounds,
            runs=kernels.repeat,
            threads=kernels.threads,
            inputs=load_inputs(feeds.file, original) if feeds.file else None,
            seed=feeds.seed,
            dims=feeds.dims,
            val_ranges=feeds.val_ranges,
            memory_budget=feeds.memory_budget,
            search_timeout=feeds.search_timeout,
            progress=status.step,
            processes=timing.processes,
            fresh_processes=timing.fresh_processes,
            turn_timeout=timing.turn_timeout,
        )
    if as_json:
        print_json([t.to_dict() for t in timings])
        return
    if timings:
        source = f"from {feeds.file}" if feeds.file else f"generated, seed {feeds.seed}"
        click.echo(f"inputs ({source}): {_inputs_text(timings[0].inputs)}")
    click.echo(
        f"{'variant':<40} {'median ms':>10} {'ratio':>7} {'rounds 25-75%':>13}"
        "  (ratio: to the original at ENABLE_ALL in the same round, median over rounds)"
    )
    for row in timings:
        if row.error is not None:
            click.echo(f"{row.label:<40} failed: {row.error}")
            continue
        median, ratio, quartiles = row.median_ms, row.ratio, row.ratio_quartiles
        ratio_text = "-" if ratio is None else f"{ratio:.2f}x"
        spread = "-" if quartiles is None else f"{quartiles[0]:.2f}-{quartiles[1]:.2f}"
        click.echo(f"{row.label:<40} {median or 0:>10.3f} {ratio_text:>7} {spread:>13}")


def _inputs_text(inputs: dict[str, dict[str, object]]) -> str:
    """``x: float32[1,3,224,224], ids: int64[1,16]``: what every variant was fed (a decoder's
    cache as one item: :func:`quantgraph.ir.name_groups.described_once`)."""
    described = []
    for name, value in inputs.items():
        shape = value["shape"]
        assert isinstance(shape, list)
        described.append((name, f"{value['dtype']}[{','.join(map(str, shape))}]"))
    return described_once(described) or "none"
