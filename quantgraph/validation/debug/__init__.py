"""Where quantization hurts and why (float model vs its QDQ form): intermediate tensors,
each quantized tensor's parameters and each node's own error, and what keeping a place in float
gains (--intermediate, --sensitivity)."""
