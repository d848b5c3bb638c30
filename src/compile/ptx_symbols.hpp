// SPDX-License-Identifier: Apache-2.0
// The names a PTX module defines at module scope: what a bundle renames for each member, so that
// modules reusing names link into one cubin (compile/ptx_rename.hpp, build/bundle.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compile {

// Its kernels (.entry), its functions (.func, internal ones too) and its variables (.global,
// .const, .shared, .local, whatever their linkage), sorted, each once; not what it only declares
// (.extern). Comments, strings, function bodies, sections and initializers are skipped.
// nullopt when a statement at module scope does not read (a directive it does not know, a name
// it cannot find, a directive after a line directive's operands, an unclosed comment, string or
// body): such a module is linked with no other.
std::optional<std::vector<std::string>> ptx_module_symbols(std::string_view ptx);

}  // namespace kcache::compile
