"""Record each quantgraph op node's own op type and name in string attributes.

For kernels that cannot see their node (onnxruntime-extensions' Python ops) and run a static
op as its dynamic sibling: their errors then still name the model's own op and node.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.walk import spec_nodes

MODEL_OP = "model_op"  # the op as the model has it (Quantize for a static one)
NODE_NAME = "node_name"


class StampOriginPass(ir.passes.InPlacePass):
    """Adds ``model_op`` and ``node_name`` string attributes to every quantgraph op node."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for _, node, _ in spec_nodes(model):
            node.attributes[MODEL_OP] = ir.AttrString(MODEL_OP, node.op_type)
            node.attributes[NODE_NAME] = ir.AttrString(NODE_NAME, node.name or "")
            modified = True
        return ir.passes.PassResult(model, modified)
