"""quantgraph: ONNX QuantizeLinear/DequantizeLinear as oneDNN-Graph-style quantization ops.

Public API: :data:`DOMAIN`, :func:`convert`, :func:`lower`, :func:`validate`,
:class:`InferenceSession`, :func:`session_options`, :func:`lower`. The custom-domain ONNX
schemas are registered by ``quantgraph.ir.onnx_schemas.register()`` (convert and sessions call it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .backends import session_options
    from .converter import convert, lower
    from .runtime.session import InferenceSession
    from .spec import DOMAIN, OPSET_VERSION
    from .validation import validate

# Lazy, even the spec (numpy, onnx): the console script installs its Ctrl-C handler after
# importing this package, and the sooner the better.
_LAZY = {
    "DOMAIN": ("spec", "DOMAIN"),
    "OPSET_VERSION": ("spec", "OPSET_VERSION"),
    "InferenceSession": ("runtime.session", "InferenceSession"),
    "session_options": ("backends", "session_options"),
    "convert": ("converter", "convert"),
    "lower": ("converter", "lower"),
    "validate": ("validation", "validate"),
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import quantgraph.spec` stays free of onnxruntime.
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attribute)
    raise AttributeError(f"module 'quantgraph' has no attribute {name!r}")


__all__ = [
    "DOMAIN",
    "OPSET_VERSION",
    "InferenceSession",
    "convert",
    "lower",
    "session_options",
    "validate",
]
