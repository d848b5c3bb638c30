#include "compile/disk_headers.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string_view>

#include "compile/header_trace.hpp"
#include "compile/options.hpp"
#include "driver/compiler_libraries.hpp"
#include "util/try.hpp"

namespace kcache::compile {
namespace {

std::string real_path(const std::string& path) {
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// `path` is `folder` or inside it; both real paths, so no ".." or link leads out.
bool inside(const std::string& path, const std::string& folder) {
    return !folder.empty() && path.starts_with(folder) &&
           (path.size() == folder.size() || path[folder.size()] == '/');
}

// The option without its leading dashes, which NVRTC takes one or two of.
std::string_view undashed(std::string_view option) {
    while (option.starts_with('-')) option.remove_prefix(1);
    return option;
}

bool is_string_header(const CudaProgram& program, std::string_view name) {
    return std::any_of(program.headers.begin(), program.headers.end(),
                       [&](const auto& header) { return header.first == name; });
}

std::string how_to_fix() {
    return "pass it in Source::headers under the name it is included by, or set "
           "Source::allow_disk_headers (headers read from disk are then not fingerprinted)";
}

}  // namespace

const std::string& toolkit_include_folder() {
    // A toolkit, a pip wheel and a distribution package all keep NVRTC in <root>/lib (or
    // lib64, targets/<triple>/lib) beside <root>/include.
    static const std::string folder = []() -> std::string {
        const auto& identity = driver::nvrtc_identity();
        if (!identity) return {};
        std::string library = real_path(identity->path);
        if (library.empty()) return {};
        const std::string lib = library.substr(0, library.rfind('/'));
        std::string include = real_path(lib.substr(0, lib.rfind('/')) + "/include");
        struct stat status {};
        if (include.empty() || stat(include.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
            return {};
        }
        return include;
    }();
    return folder;
}

// Before compiling: an option that makes NVRTC read from disk what no fingerprint covers. Only
// the toolkit's include folder (or one inside it) is covered, through the compiler's identity;
// a search folder elsewhere is refused even before it supplies a header, since a file created
// there later would shadow one the fingerprint knows.
Result<void> check_disk_options(const CudaProgram& program) {
    if (program.allow_disk_headers) return {};
    TRY_ASSIGN(const std::vector<std::string> normalized, normalize_options(program.options));
    const std::string& toolkit = toolkit_include_folder();
    auto refused = [&](const std::string& option, const std::string& what) {
        return Error(Errc::kInvalidArgument,
                     "option '" + option + "' makes NVRTC read " + what +
                         " from disk, which no fingerprint covers (only the toolkit's " +
                         (toolkit.empty() ? std::string("headers") : toolkit) +
                         " are): " + how_to_fix());
    };
    for (const std::string& option : normalized) {
        if (option.starts_with("-I")) {
            if (!inside(real_path(option.substr(2)), toolkit)) return refused(option, "headers");
        } else if (option.starts_with("-include=")) {
            const std::string file = option.substr(std::string_view("-include=").size());
            if (!is_string_header(program, file) && !inside(real_path(file), toolkit)) {
                return refused(option, "a header");
            }
        } else {
            const std::string_view name = undashed(option);
            for (std::string_view pch : {"pch", "use-pch", "pch-dir", "create-pch"}) {
                if (name == pch || (name.starts_with(pch) &&
                                    (name[pch.size()] == '=' || name[pch.size()] == ' '))) {
                    return refused(option, "precompiled headers");
                }
            }
        }
    }
    return {};
}

// After compiling: the files the trace names that are neither a header passed as a string, nor
// NVRTC's built-in one, nor the toolkit's. A string header wins over a file of the same name
// (NVRTC looks there first), and a relative name is NVRTC's own, relative to the working folder.
std::vector<std::string> disk_headers_of(const CudaProgram& program,
                                         const std::vector<std::string>& processed) {
    const std::string& toolkit = toolkit_include_folder();
    std::vector<std::string> found;
    for (const std::string& name : processed) {
        if (name == kBuiltinHeader || is_string_header(program, name)) continue;
        if (inside(real_path(name), toolkit)) continue;  // realpath: no ".." leads out of it
        if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(name);
    }
    return found;
}

Error disk_headers_refused(const CudaProgram& program, const Target& target,
                           const std::vector<std::string>& files) {
    std::string listed;
    for (const auto& file : files) listed += (listed.empty() ? "" : ", ") + file;
    return Error(Errc::kInvalidArgument,
                 program.name + " for " + target.name() + " reads " + listed +
                     " from disk, which no fingerprint covers (a change there would not be "
                     "noticed): " +
                     how_to_fix());
}

}  // namespace kcache::compile
