"""Benchmarks: the kernels against onnxruntime's own Q/DQ (:mod:`.kernels`, with the 4-bit
weight rows of :mod:`.weights`) and whole models, each variant in its own process
(:mod:`.models`)."""
