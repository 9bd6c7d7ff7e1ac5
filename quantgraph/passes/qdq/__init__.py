"""ONNX's QuantizeLinear / DequantizeLinear (and the weight-only Cast x scale form) to the
spec ops and back."""
