// SPDX-License-Identifier: Apache-2.0
// `kcache demo`: the seed's scenario, an inference-like loop over shape-keyed kernels.
#pragma once

namespace kcache::tool {

struct DemoOptions {
    int passes = 3;
    bool json = false;
};

// Exit status: 0 on success or when there is no GPU (said plainly), 1 on a failure.
int run_demo(const DemoOptions& options);

}  // namespace kcache::tool
