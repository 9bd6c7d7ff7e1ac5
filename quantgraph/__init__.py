"""quantgraph: ONNX QuantizeLinear/DequantizeLinear as oneDNN-Graph-style quantization ops.

Public API:

* ``convert(model)``: rewrite a QDQ model's Q/DQ into quantgraph's ops (a RewriteResult).
* ``lower(model)``: rewrite quantgraph's ops back into QuantizeLinear/DequantizeLinear.
* ``validate(original, rewritten)``: run both on the same inputs and compare (a ValidationReport).
* ``fallback(float_model, quantized_model, target=...)``: the smallest set kept in float that
  reaches a quality target (a FallbackResult: the model, the set, the curve).
* ``InferenceSession(model, backend)``: an onnxruntime session that runs quantgraph's ops.
* ``session_options(backend)``: onnxruntime SessionOptions with a backend's kernels registered.
* ``DOMAIN``: the ONNX domain of quantgraph's ops ("com.quantgraph").
* ``OPSET_VERSION``: the version of that domain.

The custom-domain ONNX schemas are registered by ``quantgraph.ir.onnx_schemas.register()``
(convert and sessions call it). Errors are :mod:`quantgraph.errors`' types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .backends import session_options
    from .converter import convert, lower
    from .float_fallback import fallback
    from .runtime.session import InferenceSession
    from .spec import DOMAIN, OPSET_VERSION
    from .validation import validate

# Lazy, even the spec (numpy, onnx): the console script installs its Ctrl-C handler after
# importing this package, and the sooner the better. dir() and help() still list them.
_LAZY = {
    "DOMAIN": ("spec", "DOMAIN"),
    "OPSET_VERSION": ("spec", "OPSET_VERSION"),
    "InferenceSession": ("runtime.session", "InferenceSession"),
    "session_options": ("backends", "session_options"),
    "convert": ("converter", "convert"),
    "lower": ("converter", "lower"),
    "validate": ("validation", "validate"),
    "fallback": ("float_fallback", "fallback"),
}


def __getattr__(name: str) -> Any:
    """The public names, each imported when first read."""
    # Lazy so that `import quantgraph.spec` stays free of onnxruntime.
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attribute)
    raise AttributeError(f"module 'quantgraph' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, the lazy public ones included (help() and completion read them)."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DOMAIN",
    "OPSET_VERSION",
    "InferenceSession",
    "convert",
    "fallback",
    "lower",
    "session_options",
    "validate",
]
