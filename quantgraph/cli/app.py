"""The ``quantgraph`` group: its commands (a module each beside this one), ``--debug``,
``--version`` and the console script's process."""

from __future__ import annotations

import gc

import click

from .bench import bench
from .convert import convert
from .fallback import fallback
from .inspect import inspect
from .lower import lower
from .process import (
    DebugAnywhere,
    Interrupted,
    cap_malloc_arenas,
    exit_interrupted,
    install_interrupt_handler,
    warnings_in_one_line,
)
from .render_json import JsonErrorGroup
from .run import run
from .tune import tune
from .validate import validate


class QuantgraphGroup(DebugAnywhere, JsonErrorGroup):
    """``--debug`` anywhere (process.py) and usage errors as JSON under --json (render_json.py)."""


@click.group(
    cls=QuantgraphGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--debug", is_flag=True, help="Show full tracebacks on errors (also after the command)."
)
@click.version_option(package_name="quantgraph")
def main(debug: bool) -> None:
    """Rewrite ONNX QuantizeLinear/DequantizeLinear into oneDNN-Graph-style quantization ops
    (DynamicQuantize, DynamicDequantize, Quantize, Dequantize), run them in onnxruntime, and
    prove the rewritten model agrees with the original.

    \b
    Typical use:
      quantgraph inspect model.onnx            what would be rewritten, what not and why
      quantgraph convert model.onnx out.onnx --validate
      quantgraph validate model.onnx out.onnx --json
      quantgraph run out.onnx --inputs in.npz --output out.npz
      quantgraph tune out.onnx                 fusion "auto": measure its plans on this CPU
      quantgraph fallback float.onnx qdq.onnx mixed.onnx --target-sqnr 30
    """
    warnings_in_one_line()


for _command in (convert, lower, validate, run, inspect, bench, tune, fallback):
    main.add_command(_command)


def console_main() -> None:
    """The console script: ``main`` in a process that ends with it."""
    install_interrupt_handler()
    cap_malloc_arenas()
    gc.disable()
    try:
        main()
    except Interrupted:  # raised outside a command (while click parses)
        exit_interrupted()
    finally:
        # Leave the graph's reference cycles to the OS: the interpreter's final collection
        # would walk every IR object of a big model (1.4 s for 100k nodes) just to exit.
        gc.freeze()
