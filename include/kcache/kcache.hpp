// SPDX-License-Identifier: Apache-2.0
// The kcache public API in one include.
#pragma once

#include "kcache/kernel_cache.hpp"
#include "kcache/launch.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
