"""Kernel backends: 'native' (C++ library), 'python' (onnxruntime-extensions) and 'onednn'
(oneDNN's Graph API), one per session.

Where the spec leaves rounding to the implementation there are two arithmetics: ``onnx``
(quantgraph's default, bit-exact with onnxruntime's QuantizeLinear) and ``onednn`` (what
oneDNN's CPU engine computes: ``saturate(rne(x * fl(1/s) + zp))``, float8 without
saturation). The native backend runs either (session config entry ``quantgraph.arithmetic``);
the python backend runs ``onnx``; the onednn backend is oneDNN, so ``onednn``.

Each backend is a :class:`~quantgraph.backends.base.Backend` object in one registry
(:func:`get`, :func:`names`); what differs between backends is a method of the object, never a
test of its name outside this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BackendError, KernelError
from . import native, onednn, python
from .base import (
    ARITHMETIC_SUMMARIES,
    ARITHMETICS,
    Arithmetic,
    Backend,
    BackendUnavailable,
    LibraryMissing,
    Unavailable,
)
from .native import ARITHMETIC_ENTRY

if TYPE_CHECKING:  # onnxruntime loads when a session is made, not when the CLI parses options
    import onnxruntime as ort

_REGISTRY: dict[str, Backend] = {
    backend.name: backend for backend in (native.BACKEND, python.BACKEND, onednn.BACKEND)
}
BACKENDS: tuple[str, ...] = tuple(_REGISTRY)


def names() -> tuple[str, ...]:
    """The registered backends' names, in the order a default is looked for."""
    return BACKENDS


def get(name: str) -> Backend:
    """The backend called ``name`` (available or not); a :class:`BackendError` listing the
    choices for a name no backend has."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendError(
            f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}"
        ) from None


def native_available() -> bool:
    return native.BACKEND.available() is None


def default_backend() -> str:
    """The first backend picked by default that the environment asks for or that can run
    here (onednn only when asked for). A set QUANTGRAPH_NATIVE_LIBRARY asks for the native
    library: if it is wrong, that is an error, never a silent fall-back to python."""
    candidates = [b for b in _REGISTRY.values() if b.by_default]
    for backend in candidates:
        if backend.requested() or backend.available() is None:
            return backend.name
    return candidates[-1].name


def require(backend: str | None) -> Backend:
    """The backend called ``backend`` (default: :func:`default_backend`) when it can run here;
    else :class:`BackendUnavailable` saying why and what to install."""
    return get(backend or default_backend()).require()


def resolve(backend: str | None) -> str:
    """The name of the backend :func:`require` gives."""
    return require(backend).name


def resolve_arithmetic(backend: str | Backend, arithmetic: str | None) -> Arithmetic:
    """The arithmetic a session on ``backend`` computes; refuses a pair that cannot be."""
    if arithmetic is not None and arithmetic not in ARITHMETICS:
        raise BackendError(
            f"unknown arithmetic {arithmetic!r}; choose one of {', '.join(ARITHMETICS)}"
        )
    chosen = get(backend) if isinstance(backend, str) else backend
    return chosen.arithmetic(arithmetic)


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

    chosen = require(backend)
    computed = resolve_arithmetic(chosen, arithmetic)
    options = options or ort.SessionOptions()
    chosen.register(options, computed)
    return options


__all__ = [
    "ARITHMETICS",
    "ARITHMETIC_SUMMARIES",
    "ARITHMETIC_ENTRY",
    "BACKENDS",
    "Arithmetic",
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "KernelError",
    "LibraryMissing",
    "Unavailable",
    "default_backend",
    "get",
    "names",
    "native_available",
    "require",
    "resolve",
    "resolve_arithmetic",
    "session_options",
]
