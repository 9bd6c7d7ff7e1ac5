"""Kernel backends: 'native' (C++ library) and 'python' (onnxruntime-extensions)."""

from __future__ import annotations

from typing import Literal

import onnxruntime as ort

from ..errors import BackendError, KernelError

Backend = Literal["native", "python"]
BACKENDS: tuple[str, ...] = ("native", "python")


def native_available() -> bool:
    try:
        from . import native  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return False
    return bool(native.is_available())


def default_backend() -> Backend:
    """The fastest backend this installation has."""
    return "native" if native_available() else "python"


def resolve(backend: str | None) -> Backend:
    chosen = backend or default_backend()
    if chosen not in BACKENDS:
        raise BackendError(f"unknown backend {chosen!r}; choose one of {', '.join(BACKENDS)}")
    if chosen == "native" and not native_available():
        raise BackendError(
            "the native backend is not built: reinstall quantgraph with a C++ compiler and "
            "cmake (`pip install .`; see README), set QUANTGRAPH_NATIVE_LIB, or use "
            "backend='python'"
        )
    return chosen  # type: ignore[return-value]


def session_options(
    backend: str | None = None, options: ort.SessionOptions | None = None
) -> ort.SessionOptions:
    """SessionOptions with one backend's kernels registered.

    Never both: one session cannot register the same domain from two libraries.
    """
    chosen = resolve(backend)
    options = options or ort.SessionOptions()
    if chosen == "native":
        from . import native  # type: ignore[attr-defined,unused-ignore]

        native.register(options)
    else:
        from . import python

        python.register(options)
    return options


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "KernelError",
    "default_backend",
    "native_available",
    "resolve",
    "session_options",
]
