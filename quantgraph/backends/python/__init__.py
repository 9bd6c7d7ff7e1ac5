"""The python backend: onnxruntime-extensions Python ops computing in numpy.

One sub-package owns all of it: :mod:`.kernels` (the numpy compute), :mod:`.ops` (the
``onnx_op`` definitions registered in onnxruntime, and the errors they record) and
:mod:`.prepare` (the passes that put a model in the form those ops run). Importing this
package loads neither onnxruntime nor onnxruntime-extensions: :mod:`.ops` defines its kernels
when it is imported, i.e. when a session registers them.
"""
