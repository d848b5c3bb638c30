// SPDX-License-Identifier: Apache-2.0
#include "bench/open_gpu.hpp"

#include <utility>

namespace kcache::bench {

std::optional<OpenGpu> open_gpu(std::string& note) {
    const auto& api = driver::cuda_api();
    if (!api) {
        note = api.error().message();
        return std::nullopt;
    }
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message();
        return std::nullopt;
    }
    return OpenGpu{**api, std::move(*context)};
}

}  // namespace kcache::bench
