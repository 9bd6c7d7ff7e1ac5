"""Graph passes (onnx-ir), one concern a file: rewriting ONNX Q/DQ into the spec ops and back,
putting spec ops in the forms backends need, and the pipelines that chain them."""

from .check_spec_rules import CheckSpecRulesPass
from .declared_dst import DeclaredDstPass
from .explicit_form import ExplicitFormPass, NoExplicitForm
from .full_check import FullCheckPass
from .integer.dynamic_quantize_linear import (
    DynamicQuantizeLinearPass,
    RestoreDynamicQuantizeLinearPass,
)
from .integer.other_formats import OtherFormatsPass
from .move_domain import MoveDomainPass
from .node_rewrite import NodeRewritePass
from .qdq.qdq_to_spec import QDQ_OPS, QdqToSpecPass
from .qdq.short_blocks import PadShortBlocksPass, TrimPaddedBlocksPass
from .qdq.spec_to_qdq import SpecToQdqPass
from .report import (
    SKIP_CODES,
    ConvertedNode,
    OtherQuantizedNode,
    RewriteReport,
    RewriteResult,
    Skip,
    SkippedNode,
)
from .stamp_origin import StampOriginPass
from .static_to_dynamic import NoDynamicForm, StaticToDynamicPass
from .unknown_dims import UnknownDimsPass

__all__ = [
    "QDQ_OPS",
    "SKIP_CODES",
    "CheckSpecRulesPass",
    "ConvertedNode",
    "DeclaredDstPass",
    "DynamicQuantizeLinearPass",
    "ExplicitFormPass",
    "FullCheckPass",
    "MoveDomainPass",
    "NoDynamicForm",
    "NoExplicitForm",
    "NodeRewritePass",
    "OtherFormatsPass",
    "OtherQuantizedNode",
    "PadShortBlocksPass",
    "QdqToSpecPass",
    "RestoreDynamicQuantizeLinearPass",
    "RewriteReport",
    "RewriteResult",
    "Skip",
    "SkippedNode",
    "SpecToQdqPass",
    "StampOriginPass",
    "StaticToDynamicPass",
    "TrimPaddedBlocksPass",
    "UnknownDimsPass",
]
