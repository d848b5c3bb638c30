// SPDX-License-Identifier: Apache-2.0
// RAII helpers over the CUDA driver for programs that run kernels through kcache (the demo, GPU
// tests, benchmarks): a device's primary context made current, and device buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::driver {

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int arch = 0;  // major*10+minor
};

// Number of CUDA devices; kNoDriver when there is no usable driver (0 devices is also an error).
Result<int> device_count();

// Retains the primary context of a device and makes it current on the constructing thread.
class PrimaryContext {
public:
    static Result<PrimaryContext> open(int ordinal);
    PrimaryContext(PrimaryContext&& other) noexcept;
    PrimaryContext& operator=(PrimaryContext&&) = delete;
    PrimaryContext(const PrimaryContext&) = delete;
    ~PrimaryContext();

    const DeviceInfo& info() const noexcept { return info_; }
    void* handle() const noexcept { return context_; }  // CUcontext
    Result<void> make_current() const;                  // on the calling thread
    Result<void> synchronize() const;

private:
    PrimaryContext() = default;
    DeviceInfo info_;
    int device_ = -1;
    void* context_ = nullptr;
};

// An extra (non-primary) context on a device, for tests of one module serving several contexts.
class OwnedContext {
public:
    static Result<OwnedContext> create(int ordinal);  // also makes it current
    OwnedContext(OwnedContext&& other) noexcept;
    OwnedContext& operator=(OwnedContext&&) = delete;
    OwnedContext(const OwnedContext&) = delete;
    ~OwnedContext();

    void* handle() const noexcept { return context_; }
    Result<void> make_current() const;

private:
    OwnedContext() = default;
    void* context_ = nullptr;
};

// Device memory in the context current at allocation; freed on destruction.
class DeviceBuffer {
public:
    static Result<DeviceBuffer> allocate(std::size_t bytes);
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&&) = delete;
    DeviceBuffer(const DeviceBuffer&) = delete;
    ~DeviceBuffer();

    // The device pointer as the value a kernel's .u64 parameter takes.
    std::uint64_t address() const noexcept { return address_; }
    std::size_t size() const noexcept { return bytes_; }
    Result<void> upload(std::span<const float> data);
    Result<std::vector<float>> download_floats() const;

private:
    DeviceBuffer() = default;
    std::uint64_t address_ = 0;
    std::size_t bytes_ = 0;
};

}  // namespace kcache::driver
