// SPDX-License-Identifier: Apache-2.0
// CUDA C++ name expressions and the lowered (mangled) names NVRTC gave them: a kernel asked for as
// "softmax<float, 32>" goes to the driver as "_Z7softmaxIfLi32EEvPf".
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kcache::build {

using LoweredNames = std::vector<std::pair<std::string, std::string>>;  // (expression, lowered)

}  // namespace kcache::build
