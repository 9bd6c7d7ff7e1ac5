"""The command line's argument groups, as Polygraphy's ``tools/args``: each module owns one
concern's options (declared once) and their parsing; a command takes a group's options by its
decorators and receives the parsed group (:func:`.base.parsed`).

backend.py     --backend, --arithmetic, --fusion (and bench's --backends, --fusions)
inputs.py      --inputs, --dim, --val-range, --seed, --iterations
output.py      --output, --force, --external-data, --report
tolerance.py   --atol, --rtol
conversion.py  --static, --keep-contrib
validation.py  --intermediate, --optimized; and the stack of every option a validation takes
               (validate and convert --validate share it)
kernels.py     bench's --sizes, --repeat, --columns, --threads, --weights, --no-spinning
model_timing.py  bench's --model, --rounds, --processes, --fresh-processes
"""

from __future__ import annotations

from .backend import BackendArgs
from .base import ArgGroup, GroupOption, parsed, refuse_given
from .conversion import ConversionArgs
from .inputs import InputArgs
from .kernels import KernelArgs
from .model_timing import ModelTimingArgs
from .output import OutputArgs
from .tolerance import ToleranceArgs
from .validation import ValidationArgs

__all__ = [
    "ArgGroup",
    "BackendArgs",
    "ConversionArgs",
    "GroupOption",
    "InputArgs",
    "KernelArgs",
    "ModelTimingArgs",
    "OutputArgs",
    "ToleranceArgs",
    "ValidationArgs",
    "parsed",
    "refuse_given",
]
