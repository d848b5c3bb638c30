// SPDX-License-Identifier: Apache-2.0
// Fuzz target: NVRTC's device time trace (compile::headers_in_trace), a JSON file read back after
// every CUDA C++ compile to learn which headers it read: any bytes give a list or nothing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compile/compiler.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string trace(reinterpret_cast<const char*>(data), size);
    const auto headers = kcache::compile::headers_in_trace(trace);
    if (!headers) return 0;
    // Every name came out of the text, so none can be longer than it.
    for (const std::string& header : *headers) KCACHE_FUZZ_CHECK(header.size() <= size);
    return 0;
}
