"""The python backend: onnxruntime-extensions Python ops computing in numpy.

One sub-package owns all of it: :mod:`.kernels` (the numpy compute), :mod:`.ops` (the
``onnx_op`` definitions registered in onnxruntime, and the errors they record) and
:mod:`.prepare` (the passes that put a model in the form those ops run). Importing this
package loads neither onnxruntime nor onnxruntime-extensions: :mod:`.ops` defines its kernels
when it is imported, i.e. when a session registers them.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from ..base import Arithmetic, Backend, Unavailable

if TYPE_CHECKING:
    import onnx_ir as ir
    import onnxruntime as ort

EXTENSIONS = "onnxruntime_extensions"


class PythonBackend(Backend):
    """numpy kernels as onnxruntime-extensions Python ops; the onnx arithmetic only."""

    name = "python"
    arithmetics = ("onnx",)
    arithmetic_refusal = (
        "the python backend computes the onnx arithmetic only; for oneDNN's arithmetic use "
        "backend 'native' (arithmetic 'onednn') or 'onednn'"
    )
    engine = "onnxruntime-extensions Python ops computing in numpy"
    prepares = True

    def available(self) -> Unavailable | None:
        if importlib.util.find_spec(EXTENSIONS) is not None:
            return None
        hint = "pip install onnxruntime-extensions"
        reason = "onnxruntime-extensions is not installed"
        message = f"the python backend cannot run: {reason}: {hint}"
        return Unavailable(self.name, reason, hint, message)

    def register(self, options: ort.SessionOptions, arithmetic: Arithmetic) -> None:
        from . import ops

        ops.register(options)

    def configure(self, options: ort.SessionOptions) -> None:
        import onnxruntime as ort

        # Kernel errors are recorded per thread; parallel execution would run kernels on
        # onnxruntime's threads, where after_run() could not see them.
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL

    def prepare(self, model: ir.Model) -> bool:
        from .prepare import prepare_model

        return prepare_model(model)

    def before_run(self) -> None:
        from . import ops

        ops.clear_pending()  # errors of other sessions on this thread are not ours

    def after_run(self) -> None:
        from . import ops

        ops.raise_pending()


BACKEND = PythonBackend()

__all__ = ["BACKEND", "PythonBackend"]
