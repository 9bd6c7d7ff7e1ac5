// AVX2 kernels. Compiled with -mavx2 -mf16c; only called after DetectIsa() saw AVX2 and F16C.
#include "simd_avx2.h"
#include "simd_kernels.h"

namespace qg::kernels {
namespace {
constexpr KernelTable kTable = simd::MakeTable<Avx2>(Isa::kAvx2, "avx2");
}  // namespace

const KernelTable* Avx2Table() { return &kTable; }

}  // namespace qg::kernels
