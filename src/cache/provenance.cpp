// SPDX-License-Identifier: Apache-2.0
#include "kcache/provenance.hpp"

namespace kcache {

const char* provenance_name(Provenance provenance) noexcept {
    switch (provenance) {
        case Provenance::kCompiled:
            return "compiled";
        case Provenance::kDriverJit:
            return "driver JIT";
        case Provenance::kMemoryTier:
            return "memory tier";
        case Provenance::kDiskTier:
            return "disk tier";
        case Provenance::kBinary:
            return "binary";
        case Provenance::kRemoteTier:
            return "remote tier";
    }
    return "unknown";
}

}  // namespace kcache
