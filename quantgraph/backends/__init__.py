"""Kernel backends: 'native' (C++ library), 'python' (onnxruntime-extensions) and 'onednn'
(oneDNN's Graph API), one per session.

Where the spec leaves rounding to the implementation there are two arithmetics: ``onnx``
(quantgraph's default, bit-exact with onnxruntime's QuantizeLinear) and ``onednn`` (what
oneDNN's CPU engine computes: ``saturate(rne(x * fl(1/s) + zp))``, float8 without
saturation). The native backend runs either (session config entry ``quantgraph.arithmetic``);
the python backend runs ``onnx``; the onednn backend is oneDNN, so ``onednn``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from ..errors import BackendError, KernelError
from .environment import library_override

Backend = Literal["native", "python", "onednn"]
BACKENDS: tuple[str, ...] = ("native", "python", "onednn")
Arithmetic = Literal["onnx", "onednn"]
ARITHMETICS: tuple[str, ...] = ("onnx", "onednn")
ARITHMETIC_ENTRY = "quantgraph.arithmetic"  # session config entry the native library reads
# backends.native.ENV_LIBRARY and its earlier name (that module loads onnxruntime)
ENV_NATIVE_LIBRARIES = ("QUANTGRAPH_NATIVE_LIBRARY", "QUANTGRAPH_NATIVE_LIB")

if TYPE_CHECKING:  # onnxruntime loads when a session is made, not when the CLI parses options
    import onnxruntime as ort


def native_available() -> bool:
    try:
        from . import native  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return False
    return bool(native.is_available())


def default_backend() -> Backend:
    """The fastest backend this installation has (onednn only when asked for). A set
    QUANTGRAPH_NATIVE_LIBRARY asks for the native library: if it is wrong, that is an error,
    never a silent fall-back to python."""
    if any(os.environ.get(name) for name in ENV_NATIVE_LIBRARIES):
        return "native"
    return "native" if native_available() else "python"


def _native_missing() -> str:
    """Why the native backend cannot run: the path QUANTGRAPH_NATIVE_LIBRARY names is not a
    file, or the library is not built."""
    try:
        from . import native  # type: ignore[attr-defined,unused-ignore]

        native.library_path()
    except ImportError:
        pass
    except BackendError as error:
        if library_override(native.ENV_LIBRARY, native.ENV_LIBRARY_DEPRECATED) is not None:
            return f"the native backend cannot run: {error}"
    return (
        "the native backend is not built: reinstall quantgraph with a C++ compiler and "
        "cmake (`pip install .`; see README), set QUANTGRAPH_NATIVE_LIBRARY, or use "
        "backend='python'"
    )


def resolve(backend: str | None) -> Backend:
    chosen = backend or default_backend()
    if chosen not in BACKENDS:
        raise BackendError(f"unknown backend {chosen!r}; choose one of {', '.join(BACKENDS)}")
    if chosen == "native" and not native_available():
        raise BackendError(_native_missing())
    if chosen == "onednn":
        from . import onednn

        reason = onednn.unavailable_reason()
        if reason is not None:
            raise BackendError(f"the onednn backend cannot run: {reason}")
    return chosen  # type: ignore[return-value]


def resolve_arithmetic(backend: Backend, arithmetic: str | None) -> Arithmetic:
    """The arithmetic a session on ``backend`` computes; refuses a pair that cannot be."""
    if arithmetic is not None and arithmetic not in ARITHMETICS:
        raise BackendError(
            f"unknown arithmetic {arithmetic!r}; choose one of {', '.join(ARITHMETICS)}"
        )
    natural: Arithmetic = "onednn" if backend == "onednn" else "onnx"
    if arithmetic is None or arithmetic == natural or backend == "native":
        return arithmetic or natural  # type: ignore[return-value]
    if backend == "onednn":
        raise BackendError("the onednn backend computes oneDNN's own arithmetic, not 'onnx'")
    raise BackendError(
        "the python backend computes the onnx arithmetic only; for oneDNN's arithmetic use "
        "backend 'native' (arithmetic 'onednn') or 'onednn'"
    )


def session_options(
    backend: str | None = None,
    options: ort.SessionOptions | None = None,
    *,
    arithmetic: str | None = None,
) -> ort.SessionOptions:
    """SessionOptions with one backend's kernels registered (never two: one session cannot
    take the same domain from two libraries). ``arithmetic`` ("onnx" or "onednn"): see the
    module's docstring."""
    import onnxruntime as ort

    chosen = resolve(backend)
    computed = resolve_arithmetic(chosen, arithmetic)
    options = options or ort.SessionOptions()
    if chosen == "native":
        from . import native  # type: ignore[attr-defined,unused-ignore]

        # Read by the library when it registers its kernels: set it first.
        options.add_session_config_entry(ARITHMETIC_ENTRY, computed)
        native.register(options)
    elif chosen == "onednn":
        from . import onednn

        onednn.register(options)
    else:
        from .python import ops

        ops.register(options)
    return options


__all__ = [
    "ARITHMETICS",
    "ARITHMETIC_ENTRY",
    "BACKENDS",
    "Arithmetic",
    "Backend",
    "BackendError",
    "KernelError",
    "default_backend",
    "native_available",
    "resolve",
    "resolve_arithmetic",
    "session_options",
]
