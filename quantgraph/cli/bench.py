"""quantgraph bench: the kernels against onnxruntime's Q/DQ, numpy and np.copyto, or (with
--model) whole models, each variant in its own process."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import shown
from .common import errors_are_one_line, print_json
from .options import JSON_OPTION, bench_options


@click.command()
@bench_options
@click.option(
    "--model",
    "models",
    nargs=2,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="ORIGINAL REWRITTEN",
    help="Time whole models instead of kernels: ORIGINAL at ORT_ENABLE_ALL (the baseline) and "
    "ORT_DISABLE_ALL, REWRITTEN per --backends and --fusions; each variant in its own process.",
)
@click.option(
    "--backends",
    default="native",
    show_default=True,
    help="With --model: comma-separated backends for REWRITTEN.",
)
@click.option(
    "--fusions",
    default="none,onnxruntime",
    show_default=True,
    help="With --model: comma-separated fusion modes for REWRITTEN.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="With --model: processes per variant (one per round, interleaved).",
)
@click.option(
    "--inputs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --model: an .npz of inputs (default: generated as validate does).",
)
@JSON_OPTION
@errors_are_one_line
def bench(
    sizes: tuple[int, ...],
    repeat: int,
    columns: tuple[int, ...],
    threads: int,
    weights: tuple[tuple[int, int], ...],
    no_spinning: bool,
    models: tuple[Path, Path] | None,
    backends: str,
    fusions: str,
    rounds: int,
    inputs: Path | None,
    as_json: bool,
) -> None:
    """Time the kernels against onnxruntime's QuantizeLinear/DequantizeLinear, plain numpy and
    np.copyto, measured in the same run; or, with --model, whole models.

    \b
    Examples:
      quantgraph bench --sizes 1048576 --weights ''
      quantgraph bench --model model.onnx model_qg.onnx --fusions none,onnxruntime --rounds 7
    """
    if models:
        _bench_models(models, backends, fusions, rounds, repeat, threads, inputs, as_json)
        return
    from .. import bench as benchmarks

    if sizes and columns and max(columns) > min(sizes):
        raise click.BadParameter(
            f"{max(columns)} columns leave no row for a size of {min(sizes)} elements "
            "(each column count must be at most the smallest of --sizes)",
            param_hint="'--columns'",
        )
    narrow = tuple(f"{benchmarks.NARROW_PREFIX}{c}" for c in columns)
    progress = (lambda text: click.echo(text, err=True)) if shown(as_json) else None
    rows = benchmarks.run(
        sizes=sizes,
        repeat=repeat,
        layouts=(*benchmarks.LAYOUTS, *narrow),
        threads=threads,
        spinning=not no_spinning,
        progress=progress,
        weights=weights,
    )
    if as_json:
        print_json([row.to_dict() for row in rows])
    else:
        click.echo(benchmarks.format_table(rows))


def _bench_models(
    models: tuple[Path, Path],
    backends: str,
    fusions: str,
    rounds: int,
    runs: int,
    threads: int,
    inputs: Path | None,
    as_json: bool,
) -> None:
    from ..backends import BACKENDS
    from ..bench_models import bench_models
    from ..fusion.plan import MODES
    from ..validation import load_inputs

    chosen = [b.strip() for b in backends.split(",") if b.strip()]
    modes = [f.strip() for f in fusions.split(",") if f.strip()]
    for name, values, allowed in (("--backends", chosen, BACKENDS), ("--fusions", modes, MODES)):
        for value in values:
            if value not in allowed:
                raise click.BadParameter(
                    f"{value!r} is not one of {', '.join(allowed)}", param_hint=name
                )
    progress = (lambda text: click.echo(text, err=True)) if shown(as_json) else None
    timings = bench_models(
        models[0],
        models[1],
        backends=chosen,
        fusions=modes,
        rounds=rounds,
        runs=runs,
        threads=threads,
        inputs=load_inputs(inputs) if inputs else None,
        progress=progress,
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
