// Drops module-scope `.global` variables of internal linkage that nothing in a PTX module refers
// to. NVRTC emits one for every static constexpr data member its headers declare (libcu++'s
// numeric_limits alone gives hundreds with CUB); each costs the driver time at every load: a CUB
// block reduce measured 3.4-4.7 ms to load on an H200 as NVRTC's cubin, 0.1 ms without them.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

namespace kcache::compile {

struct PrunedPtx {
    std::string ptx;
    std::size_t dropped = 0;  // declarations removed
};

// A declaration is dropped only when all of these hold: it starts with `.global` at module scope
// (so no .visible, .extern, .weak or .common before it: internal linkage), its name occurs
// nowhere else in the text as a whole identifier (comments included: a mention keeps it), and the
// name is not in `keep`. Dropping one may leave another unreferenced (an initializer naming it);
// that is repeated until nothing more goes. Text it cannot follow (unbalanced braces, an
// unterminated comment or string) comes back unchanged with dropped = 0.
PrunedPtx drop_unreferenced_globals(std::string_view ptx, const std::set<std::string>& keep = {});

}  // namespace kcache::compile
