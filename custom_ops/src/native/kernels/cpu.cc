// Run-time choice of the kernel table.
#include <cstdlib>
#include <cstring>

#include "kernels.h"

namespace qg::kernels {

#if !defined(QG_HAVE_AVX2)
const KernelTable* Avx2Table() { return nullptr; }
#endif
#if !defined(QG_HAVE_AVX512)
const KernelTable* Avx512Table() { return nullptr; }
#endif

Isa DetectIsa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // libgcc's checks include the OS (XCR0) having enabled the AVX / AVX-512 register state.
  if (Avx512Table() != nullptr && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    return Isa::kAvx512;
  }
  if (Avx2Table() != nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kScalar;
}

Isa SelectIsa() {
  static const Isa detected = DetectIsa();
  const char* requested = std::getenv("QUANTGRAPH_NATIVE_ISA");
  if (requested == nullptr || *requested == '\0') return detected;
  Isa cap = detected;
  if (std::strcmp(requested, "scalar") == 0) {
    cap = Isa::kScalar;
  } else if (std::strcmp(requested, "avx2") == 0) {
    cap = Isa::kAvx2;
  } else if (std::strcmp(requested, "avx512") == 0) {
    cap = Isa::kAvx512;
  }
  return static_cast<int>(cap) < static_cast<int>(detected) ? cap : detected;
}

const char* IsaName(Isa isa) { return GetKernelTable(isa).name; }

const KernelTable& GetKernelTable(Isa isa) {
  if (isa == Isa::kAvx512 && Avx512Table() != nullptr) return *Avx512Table();
  if (isa != Isa::kScalar && Avx2Table() != nullptr) return *Avx2Table();
  return *ScalarTable();
}

}  // namespace qg::kernels
