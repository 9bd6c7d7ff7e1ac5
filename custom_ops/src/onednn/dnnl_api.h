// oneDNN's C API as libquantgraph_onednn uses it. The library is compiled against whichever
// oneDNN 3.x headers the build found (PyPI's v3.2 by default) but never links libdnnl: its
// dnnl_* symbols bind to the libdnnl.so.3 the process loaded first (RTLD_GLOBAL), which may be
// newer than the headers. Enum values that older headers lack are part of oneDNN's ABI (they
// never change once released), so they are spelled out here for those headers; headers that
// define them (versions checked against the oneDNN sources) are used as they are.
#pragma once

#include <oneapi/dnnl/dnnl_graph.h>
#include <oneapi/dnnl/dnnl_version.h>

#include <oneapi/dnnl/dnnl_common.hpp>  // dnnl::error, which oneDNN's C API lets escape

#define QG_DNNL_HEADERS (DNNL_VERSION_MAJOR * 100 + DNNL_VERSION_MINOR)

namespace qg::onednn {

// Data types: f8 since v3.4, s4/u4 since v3.5 (values from v3.13's dnnl_common_types.h).
#if QG_DNNL_HEADERS >= 304
inline constexpr dnnl_data_type_t kDnnlF8E5M2 = dnnl_f8_e5m2;
inline constexpr dnnl_data_type_t kDnnlF8E4M3 = dnnl_f8_e4m3;
#else
inline constexpr dnnl_data_type_t kDnnlF8E5M2 = static_cast<dnnl_data_type_t>(9);
inline constexpr dnnl_data_type_t kDnnlF8E4M3 = static_cast<dnnl_data_type_t>(10);
#endif
#if QG_DNNL_HEADERS >= 305
inline constexpr dnnl_data_type_t kDnnlS4 = dnnl_s4;
inline constexpr dnnl_data_type_t kDnnlU4 = dnnl_u4;
#else
inline constexpr dnnl_data_type_t kDnnlS4 = static_cast<dnnl_data_type_t>(11);
inline constexpr dnnl_data_type_t kDnnlU4 = static_cast<dnnl_data_type_t>(12);
#endif

// DynamicDequantize's group_shape attribute, since v3.7 (v3.13: 78, right after zps).
#if QG_DNNL_HEADERS >= 307
inline constexpr dnnl_graph_op_attr_t kAttrGroupShape = dnnl_graph_op_attr_group_shape;
#else
inline constexpr dnnl_graph_op_attr_t kAttrGroupShape =
    static_cast<dnnl_graph_op_attr_t>(dnnl_graph_op_attr_zps + 1);
#endif

}  // namespace qg::onednn
