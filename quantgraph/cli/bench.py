"""quantgraph bench: the kernels against onnxruntime's Q/DQ, numpy and np.copyto, or (with
--model) whole models, each variant in its own process."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import shown
from .args import BackendArgs, InputArgs, KernelArgs, parsed, refuse_given
from .args.backend import BENCH_LIST_OPTIONS
from .args.inputs import inputs_option
from .args.kernels import KERNEL_OPTIONS
from .process import errors_are_one_line
from .render_json import JSON_OPTION, print_json

# Options that the other kind of timing would ignore.
KERNELS_ONLY = ("sizes", "columns", "weights", "no_spinning")
MODELS_ONLY = ("rounds", "processes", "fresh_processes")


@click.command()
@KERNEL_OPTIONS
@click.option(
    "--model",
    "models",
    nargs=2,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="ORIGINAL REWRITTEN",
    help="Time whole models instead of kernels: ORIGINAL at ORT_ENABLE_ALL (the baseline) and "
    "ORT_DISABLE_ALL, REWRITTEN per --backends and --fusions; each variant in its own process, "
    "the processes taking turns round by round.",
)
@BENCH_LIST_OPTIONS
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="With --model: rounds; each gives every variant --repeat calls, in a rotated order.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="With --model: processes per variant, the rounds going round-robin over them.",
)
@click.option(
    "--fresh-processes",
    is_flag=True,
    help="With --model: a new process per variant per round instead of one process per variant "
    "that builds its session once and takes turns with the others (slower; each round then "
    "lasts seconds, and the machine's drift over them enters the ratios).",
)
@inputs_option("bench")
@JSON_OPTION
@errors_are_one_line
@parsed(kernels=KernelArgs, engine=BackendArgs, feeds=InputArgs)
def bench(
    models: tuple[Path, Path] | None,
    rounds: int,
    processes: int,
    fresh_processes: bool,
    as_json: bool,
    kernels: KernelArgs,
    engine: BackendArgs,
    feeds: InputArgs,
) -> None:
    """Time the kernels against onnxruntime's QuantizeLinear/DequantizeLinear, plain numpy and
    np.copyto, measured in the same run; or, with --model, whole models.

    \b
    Examples:
      quantgraph bench --sizes 1048576 --weights ''
      quantgraph bench --model model.onnx model_qg.onnx --fusions none,onnxruntime --rounds 7
    """
    if models:
        refuse_given(KERNELS_ONLY, "only to kernel timing, not with --model")
        if fresh_processes:
            refuse_given(("processes",), "only to live processes, not with --fresh-processes")
        schedule = (processes, fresh_processes)
        _bench_models(models, engine, rounds, schedule, kernels, feeds.file, as_json)
        return
    refuse_given(MODELS_ONLY, "only with --model ORIGINAL REWRITTEN")
    from ..bench import kernels as benchmarks

    narrow = tuple(f"{benchmarks.NARROW_PREFIX}{c}" for c in kernels.narrow_columns())
    progress = (lambda text: click.echo(text, err=True)) if shown(as_json) else None
    rows = benchmarks.run(
        sizes=kernels.sizes,
        repeat=kernels.repeat,
        layouts=(*benchmarks.LAYOUTS, *narrow),
        threads=kernels.threads,
        spinning=not kernels.no_spinning,
        progress=progress,
        weights=kernels.weights,
    )
    if as_json:
        print_json([row.to_dict() for row in rows])
    else:
        click.echo(benchmarks.format_table(rows))


def _bench_models(
    models: tuple[Path, Path],
    engine: BackendArgs,
    rounds: int,
    schedule: tuple[int, bool],
    kernels: KernelArgs,
    inputs: Path | None,
    as_json: bool,
) -> None:
    from ..bench.models import bench_models
    from ..validation import load_inputs

    chosen, modes = engine.bench_lists()
    progress = (lambda text: click.echo(text, err=True)) if shown(as_json) else None
    timings = bench_models(
        models[0],
        models[1],
        backends=chosen,
        fusions=modes,
        rounds=rounds,
        runs=kernels.repeat,
        threads=kernels.threads,
        inputs=load_inputs(inputs) if inputs else None,
        progress=progress,
        processes=schedule[0],
        fresh_processes=schedule[1],
    )
    if as_json:
        print_json([t.to_dict() for t in timings])
        return
    click.echo(f"{'variant':<40} {'median ms':>10} {'ratio':>7}  (to the original at ENABLE_ALL)")
    for timing in timings:
        if timing.error is not None:
            click.echo(f"{timing.label:<40} failed: {timing.error}")
            continue
        median, ratio = timing.median_ms, timing.ratio
        ratio_text = "-" if ratio is None else f"{ratio:.2f}x"
        click.echo(f"{timing.label:<40} {median or 0:>10.3f} {ratio_text:>7}")
