// SPDX-License-Identifier: Apache-2.0
// The driver and device 0's primary context, current on the calling thread (PrimaryContext::open
// makes it so): what a benchmark that calls the driver itself opens first.
#pragma once

#include <optional>
#include <string>

#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"

namespace kcache::bench {

struct OpenGpu {
    const driver::CudaApi& cu;
    driver::PrimaryContext context;
};

// nullopt, with `note` saying why, without a driver or a device.
std::optional<OpenGpu> open_gpu(std::string& note);

}  // namespace kcache::bench
