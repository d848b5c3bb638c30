// SPDX-License-Identifier: Apache-2.0
// The compile worker's side of the WorkerPool: `kcache compile-worker` runs this in a process of
// its own, so that the compiles of several workers run in parallel (NVRTC serializes in-process,
// nvJitLink slows down there).
#pragma once

namespace kcache::compile {

// Sends a WorkerHello, then answers requests (compile CUDA C++, link PTX) read from `in_fd` on
// `out_fd` until end of file (returns 0). A request that cannot be decoded or compiled gets an
// error response and the loop goes on; only a broken stream (bad framing, closed pipe) ends it
// early, with 1, since the next frame cannot be found after one. When `out_fd` is standard output,
// standard output is moved to standard error first, so that a stray print from a library cannot
// corrupt the protocol.
int run_compile_worker(int in_fd, int out_fd);

}  // namespace kcache::compile
