"""The onnxruntime engine: units handed back to onnxruntime's own fused kernels, and the graph
onnxruntime makes of a model (also auto's candidate in the original's own form)."""
