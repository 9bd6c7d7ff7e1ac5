"""quantgraph lower --json: spec ops rewritten back into QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

from .common import STRING, Schema, closed_object
from .convert import REWRITE

TITLE = "quantgraph lower --json: spec ops rewritten back into QuantizeLinear/DequantizeLinear."
BODY: Schema = closed_object({**REWRITE, "output": STRING})
