// SPDX-License-Identifier: Apache-2.0
#include "util/xxh3_kernels.hpp"

namespace kcache::util::xxh3 {

const Kernels& kernels() {
    static const Kernels& chosen = []() -> const Kernels& {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (__builtin_cpu_supports("avx2")) return avx2_kernels();
#endif
        return baseline_kernels();
    }();
    return chosen;
}

}  // namespace kcache::util::xxh3
