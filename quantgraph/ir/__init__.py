"""onnx-ir helpers shared by passes, backends, validation and the converter: walking graphs,
reading values, rewriting nodes, node order, model files and safe output writes, the ONNX
schemas of the spec ops and the opset rule. Knows the spec, nothing of runtimes."""
