// SPDX-License-Identifier: Apache-2.0
// The name of a source kind, as fingerprints and messages spell it: in the build layer, the
// lowest one that reads it, since util knows nothing of kcache's sources.
#include "kcache/source.hpp"

namespace kcache {

const char* source_kind_name(SourceKind kind) noexcept {
    switch (kind) {
        case SourceKind::kPtx:
            return "ptx";
        case SourceKind::kCubin:
            return "cubin";
        case SourceKind::kFatbin:
            return "fatbin";
        case SourceKind::kCuda:
            return "cuda";
    }
    return "unknown";
}

}  // namespace kcache
