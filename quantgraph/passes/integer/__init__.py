"""QOperator nodes, integer ops (MatMulInteger, ConvInteger) and DynamicQuantizeLinear, to the
spec ops and back; the formats quantgraph does not rewrite, reported with a reason."""
