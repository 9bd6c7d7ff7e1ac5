"""onnxruntime-extensions, imported without a line on stderr.

Its import imports transformers where that is installed (its tokenizer converters), and
transformers without PyTorch logs an advisory line ("PyTorch was not found...") at import: a
session on the python backend would print it. Advisory lines are off during that import only
(transformers reads the variable when it logs); the caller's logging is left as it was.
"""

from __future__ import annotations

import os

_ADVICE = "TRANSFORMERS_NO_ADVISORY_WARNINGS"
_given = os.environ.get(_ADVICE)
os.environ[_ADVICE] = "1"
try:
    import onnxruntime_extensions
    from onnxruntime_extensions import PyCustomOpDef, get_library_path, onnx_op
finally:
    if _given is None:
        del os.environ[_ADVICE]
    else:
        os.environ[_ADVICE] = _given

__all__ = ["PyCustomOpDef", "get_library_path", "onnx_op", "onnxruntime_extensions"]
