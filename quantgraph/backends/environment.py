"""The environment variables that point a backend at a library, named by one scheme:
``QUANTGRAPH_<WHAT>_LIBRARY`` (``QUANTGRAPH_NATIVE_LIBRARY``, ``QUANTGRAPH_ONEDNN_LIBRARY``,
``QUANTGRAPH_ONEDNN_KERNELS_LIBRARY``). The names of earlier releases (``QUANTGRAPH_NATIVE_LIB``,
``QUANTGRAPH_ONEDNN_LIB``) still work, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import os
import warnings


def library_override(name: str, deprecated: str) -> tuple[str, str] | None:
    """``(variable, value)`` of ``$name``, else of ``$deprecated`` (warning that it is
    deprecated); ``None`` when neither is set to a non-empty value."""
    value = os.environ.get(name)
    if value:
        return name, value
    value = os.environ.get(deprecated)
    if value:
        warnings.warn(
            f"{deprecated} is deprecated: set {name} instead", DeprecationWarning, stacklevel=3
        )
        return deprecated, value
    return None


__all__ = ["library_override"]
