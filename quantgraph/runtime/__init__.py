"""Running models that use the spec ops: an onnxruntime session on one backend."""
