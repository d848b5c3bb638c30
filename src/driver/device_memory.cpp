// SPDX-License-Identifier: Apache-2.0
#include "driver/device_memory.hpp"

#include <array>

#include "driver/cuda_api.hpp"

namespace kcache::driver {
namespace {

Result<const CudaApi*> api() {
    const auto& loaded = cuda_api();
    if (!loaded) return loaded.error();
    return loaded.value();
}

}  // namespace

Result<int> device_count() {
    auto cu = api();
    if (!cu) return cu.error();
    int count = 0;
    CUresult rc = (*cu)->cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) return (*cu)->error(Errc::kNoDriver, "cuDeviceGetCount", rc);
    if (count == 0) return Error(Errc::kNoDriver, "no CUDA device found");
    return count;
}

Result<PrimaryContext> PrimaryContext::open(int ordinal) {
    auto cu = api();
    if (!cu) return cu.error();
    const CudaApi& a = **cu;
    PrimaryContext context;
    CUdevice device = 0;
    CUresult rc = a.cuDeviceGet(&device, ordinal);
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuDeviceGet", rc);
    CUcontext raw = nullptr;
    rc = a.cuDevicePrimaryCtxRetain(&raw, device);
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuDevicePrimaryCtxRetain", rc);
    context.device_ = device;
    context.context_ = raw;
    std::array<char, 256> name{};
    a.cuDeviceGetName(name.data(), static_cast<int>(name.size()), device);
    int major = 0;
    int minor = 0;
    a.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    a.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    context.info_ = {ordinal, name.data(), major * 10 + minor};
    if (auto current = context.make_current(); !current) return current.error();
    return context;
}

PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept
    : info_(std::move(other.info_)), device_(other.device_), context_(other.context_) {
    other.context_ = nullptr;
}

PrimaryContext::~PrimaryContext() {
    if (context_ != nullptr) (void)(*api())->cuDevicePrimaryCtxRelease(device_);
}

Result<void> PrimaryContext::make_current() const {
    const CudaApi& a = **api();
    CUresult rc = a.cuCtxSetCurrent(static_cast<CUcontext>(context_));
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuCtxSetCurrent", rc);
    return ok();
}

Result<void> PrimaryContext::synchronize() const {
    const CudaApi& a = **api();
    CUresult rc = a.cuCtxSynchronize();
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuCtxSynchronize", rc);
    return ok();
}

Result<OwnedContext> OwnedContext::create(int ordinal) {
    auto cu = api();
    if (!cu) return cu.error();
    const CudaApi& a = **cu;
    CUdevice device = 0;
    CUresult rc = a.cuDeviceGet(&device, ordinal);
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuDeviceGet", rc);
    OwnedContext context;
    CUcontext raw = nullptr;
    rc = a.cuCtxCreate(&raw, nullptr, 0, device);
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuCtxCreate", rc);
    context.context_ = raw;
    return context;
}

OwnedContext::OwnedContext(OwnedContext&& other) noexcept : context_(other.context_) {
    other.context_ = nullptr;
}

OwnedContext::~OwnedContext() {
    if (context_ != nullptr) (void)(*api())->cuCtxDestroy(static_cast<CUcontext>(context_));
}

Result<void> OwnedContext::make_current() const {
    const CudaApi& a = **api();
    CUresult rc = a.cuCtxSetCurrent(static_cast<CUcontext>(context_));
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuCtxSetCurrent", rc);
    return ok();
}

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
    auto cu = api();
    if (!cu) return cu.error();
    DeviceBuffer buffer;
    CUdeviceptr address = 0;
    CUresult rc = (*cu)->cuMemAlloc(&address, bytes);
    if (rc != CUDA_SUCCESS) return (*cu)->error(Errc::kDriverError, "cuMemAlloc", rc);
    buffer.address_ = address;
    buffer.bytes_ = bytes;
    return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(other.address_), bytes_(other.bytes_) {
    other.address_ = 0;
}

DeviceBuffer::~DeviceBuffer() {
    if (address_ != 0) (void)(*api())->cuMemFree(address_);
}

Result<void> DeviceBuffer::upload(std::span<const float> data) {
    if (data.size_bytes() > bytes_)
        return Error(Errc::kInvalidArgument, "upload larger than buffer");
    const CudaApi& a = **api();
    CUresult rc = a.cuMemcpyHtoD(address_, data.data(), data.size_bytes());
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuMemcpyHtoD", rc);
    return ok();
}

Result<std::vector<float>> DeviceBuffer::download_floats() const {
    std::vector<float> out(bytes_ / sizeof(float));
    const CudaApi& a = **api();
    CUresult rc = a.cuMemcpyDtoH(out.data(), address_, out.size() * sizeof(float));
    if (rc != CUDA_SUCCESS) return a.error(Errc::kDriverError, "cuMemcpyDtoH", rc);
    return out;
}

}  // namespace kcache::driver
