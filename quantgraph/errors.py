"""Errors quantgraph raises for users: each message names the file, node or tensor at fault."""

from __future__ import annotations


class QuantgraphError(Exception):
    """Base of every error quantgraph reports to a user."""


class ModelError(QuantgraphError):
    """A model file cannot be read or written, or is not a usable ONNX model."""


class BackendError(QuantgraphError):
    """A model cannot run on the chosen backend (the message says why and what to do)."""


class KernelError(QuantgraphError, RuntimeError):
    """A kernel rejected its inputs at run time; the message names op, node and rule."""
