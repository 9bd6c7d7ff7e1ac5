#include "native/groups.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/spec.h"
#include "native/geometry.h"
#include "native/kernels/kernels.h"
#include "native/parallel.h"
#include "native/params.h"

namespace qg::native {
namespace {

using spec::kBF16;
using spec::kF16;
using spec::kF32;
using spec::kS32;
using spec::kS4;
using spec::kS8;
using spec::kU4;
using spec::kU8;

constexpr int GroupSrcIndex(int src) {
  return src == kS8 ? kernels::kGroupS8
         : src == kU8 ? kernels::kGroupU8
         : src == kS4 ? kernels::kGroupS4
                      : kernels::kGroupU4;
}

constexpr int GroupDstIndex(int dst) {
  return dst == kF32 ? kernels::kGroupF32 : dst == kF16 ? kernels::kGroupF16 : kernels::kGroupBF16;
}

constexpr size_t DstSize(int dst) { return dst == kF32 ? 4 : 2; }

// Parameters converted for one kernel call at most (f32 scales and s32 zero points are used in
// place).
constexpr size_t kParamBlock = 1024;

}  // namespace

void ComputeGroups(const CallArgs& a, const ExecContext& ex, int src, int dst, int zps_type) {
  const Grouping grouping = MakeGrouping(a);
  const size_t m = grouping.dims.size();
  const size_t length = grouping.dims[m - 1];  // a row
  const size_t group = grouping.groups[m - 1];
  const size_t params_per_row = length / group;
  const size_t rows = a.elements / length;
  // Rows in aligned blocks of `share` use the same parameter row.
  const size_t share = m >= 2 ? grouping.groups[m - 2] : 1;
  // The parameter row of a row: its leading indices divided by their groups, row-major.
  std::vector<size_t> param_stride(m, 1);
  for (size_t k = m - 1; k-- > 0;) {
    param_stride[k] =
        k + 2 < m ? param_stride[k + 1] * (grouping.dims[k + 1] / grouping.groups[k + 1]) : 1;
  }
  auto param_row = [&](size_t row) {
    size_t index = 0;
    for (size_t k = m - 1; k-- > 0;) {
      const size_t i = row % grouping.dims[k];
      row /= grouping.dims[k];
      index += i / grouping.groups[k] * param_stride[k];
    }
    return index;
  };

  // Large s32 zero points need the scalar table (one pass over them, s32 only: the others fit).
  bool fits = true;
  if (zps_type == kS32) {
    fits = kernels::ZeroPointRange(static_cast<const int32_t*>(a.zps), a.scale_count).FitsFloat();
  }
  const kernels::KernelTable& table = fits ? *ex.table : *kernels::ScalarTable();
  const bool stream = a.elements * DstSize(dst) >= kStreamMinBytes;
  const kernels::DequantizeGroupFn kernel =
      table.dequantize_group[GroupSrcIndex(src)][GroupDstIndex(dst)][stream];

  const size_t chunk = ChunkFor(a.elements);
  const size_t cols_per_task = length <= chunk ? length : chunk;
  const size_t col_tasks = (length + cols_per_task - 1) / cols_per_task;
  size_t rows_per_task = chunk / cols_per_task > 0 ? chunk / cols_per_task : 1;
  if (rows_per_task > share) rows_per_task -= rows_per_task % share;  // whole blocks
  const size_t row_tasks = (rows + rows_per_task - 1) / rows_per_task;
  const bool direct_scales = a.scales_type == kF32;
  const bool direct_zps = zps_type == kS32 || a.zps == nullptr;
  auto* y = static_cast<char*>(a.dst);
  ParallelTasks(ex, row_tasks * col_tasks, a.elements, stream ? table.fence : nullptr,
                [&](size_t task) {
                  alignas(64) float scale_buffer[kParamBlock];
                  alignas(64) int32_t zp_buffer[kParamBlock];
                  const size_t r0 = task / col_tasks * rows_per_task;
                  const size_t r1 = std::min(r0 + rows_per_task, rows);
                  const size_t c0 = task % col_tasks * cols_per_task;
                  const size_t c1 = std::min(c0 + cols_per_task, length);
                  for (size_t c = c0; c < c1;) {
                    const size_t first = c / group;  // parameter of element c in its row
                    const size_t c_end = std::min(c1, (first + kParamBlock) * group);
                    const size_t count = (c_end - 1) / group - first + 1;
                    for (size_t r = r0; r < r1;) {
                      const size_t r_end = std::min(r1, (r / share + 1) * share);
                      const size_t at = param_row(r) * params_per_row + first;
                      const float* scale = static_cast<const float*>(a.scales) + at;
                      if (!direct_scales) {
                        ScalesAsFloat(a.scales, a.scales_type, at, count, scale_buffer);
                        scale = scale_buffer;
                      }
                      const int32_t* zp = nullptr;
                      if (a.zps != nullptr) {
                        zp = static_cast<const int32_t*>(a.zps) + at;
                        if (!direct_zps) {
                          ZpsAsInt32(a.zps, zps_type, at, count, zp_buffer);
                          zp = zp_buffer;
                        }
                      }
                      const size_t offset = r * length + c;
                      kernel(kernels::GroupArgs{a.src, offset, length, y + offset * DstSize(dst),
                                                length, c_end - c, r_end - r, scale, zp, group,
                                                c % group});
                      r = r_end;
                    }
                    c = c_end;
                  }
                });
}

}  // namespace qg::native
