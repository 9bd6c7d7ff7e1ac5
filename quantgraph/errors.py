"""Errors quantgraph raises for users: each message names the file, node or tensor at fault."""

from __future__ import annotations

import re


class QuantgraphError(Exception):
    """Base of every error quantgraph reports to a user."""


class ModelError(QuantgraphError):
    """A model file cannot be read or written, or is not a usable ONNX model."""


class NoQuantization(ModelError):
    """A model with nothing quantized (a float model): there is nothing to convert; quantize it
    first (the message says how)."""


class NothingToLower(ModelError):
    """A model holding no quantgraph op: there is nothing to lower (``lower`` takes what
    ``convert`` wrote; the message says what the model holds)."""


class BackendError(QuantgraphError):
    """A model cannot run on the chosen backend (the message says why and what to do)."""


class BackendLimit(BackendError):
    """A node only the chosen backend cannot run: another backend (the message names it) can.
    Callers that count such refusals (the fuzzer) test this type, not the message's words."""


class QuantgraphWarning(UserWarning):
    """Something a user asked for was done differently than they may assume (the message says
    what and why); the CLI prints it as one line, ``quantgraph: warning: ...``."""


class FusionWarning(QuantgraphWarning):
    """An explicitly requested fusion formed no unit: every spec op runs alone."""


class KernelError(QuantgraphError, RuntimeError):
    """A kernel rejected its inputs at run time; the message names op, node and rule."""


# "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Exception during initialization: " and
# "... Non-zero status code returned while running X node. Name:'n' Status Message: " say nothing
# the kernel's own message (which names op, node and rule) does not.
_ORT_WRAPPING = re.compile(
    r"^\[ONNXRuntimeError\] : \d+ : \w+ : (?:Exception during initialization: |"
    r"Non-zero status code returned while running .*? Status Message: )?"
)


# onnxruntime's "Non-zero status code returned while running X node. Name:'n' Status Message: "
ORT_NODE = re.compile(
    r"Non-zero status code returned while running (\w+) node\. Name:'([^']*)' Status Message: "
)
# where in onnxruntime's sources a message was raised: "/onnxruntime_src/.../x.cc:360 void*
# onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) "
_ORT_SOURCE = re.compile(r"(?:/\S+)?/onnxruntime_src/\S+:\d+ (?:[^()]*\([^()]*\)\S* )?")


def failure_reason(error: BaseException | str) -> str:
    """Why something failed, on one line, in the failing node's words: onnxruntime's status
    prefix, its "while running ... Status Message:" wrapping and its source locations left
    out (``DynamicDequantize node 'w': Failed to allocate memory for requested buffer of size
    262144000``)."""
    text = one_line(error)
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = ORT_NODE.sub(lambda m: f"{m.group(1)} node '{m.group(2)}': ", text)
    return _ORT_SOURCE.sub("", text)


def one_line(error: BaseException | str) -> str:
    """An error's text on one line, without onnxruntime's wrapping around a quantgraph kernel's
    message (``<Op> node '<name>': ...``); other onnxruntime errors keep their words."""
    text = " ".join(str(error).split()) or type(error).__name__
    inner = _ORT_WRAPPING.sub("", text)
    return inner if re.match(r"^\w+ node '", inner) else text
