"""onnxruntime's com.microsoft weight formats (MatMulNBits, GatherBlockQuantized) and their
packed N-bit layouts, to the spec ops and back."""
