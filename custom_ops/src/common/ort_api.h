// onnxruntime's C/C++ API as this library uses it: initialised by RegisterCustomOps from the
// OrtApiBase that onnxruntime passes in; the library never links libonnxruntime.
#pragma once

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT
