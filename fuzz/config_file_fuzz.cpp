// Fuzz target: kcache.conf's text (util::parse_config_file), which a cache directory supplies.
// Built only once src/util/config.hpp declares parse_config_file (see fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "util/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);
    // Whatever it returns, any text is a value or an error: never a crash, a leak or UB.
    std::ignore = kcache::util::parse_config_file(text, "/fuzz/kcache.conf");
    return 0;
}
