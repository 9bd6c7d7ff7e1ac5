// AVX-512 kernels. Compiled with -mavx512f -mavx512bw -mavx512vl; only called after
// DetectIsa() saw those features.
#include "simd_avx512.h"
#include "simd_kernels.h"

namespace qg::kernels {
namespace {
constexpr KernelTable kTable = simd::MakeTable<Avx512>(Isa::kAvx512, "avx512");
}  // namespace

const KernelTable* Avx512Table() { return &kTable; }

}  // namespace qg::kernels
