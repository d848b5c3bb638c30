// SPDX-License-Identifier: Apache-2.0
#include "driver/nvrtc.hpp"

#include <cstddef>
#include <tuple>

#include "driver/compiler_api.hpp"

namespace kcache::driver {

struct NvrtcProgram::State {
    explicit State(const NvrtcApi& api_in) : api(api_in) {}
    ~State() {
        if (program != nullptr) std::ignore = api.nvrtcDestroyProgram(&program);
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    // "<call>: NVRTC_ERROR_..."
    Error failed(const std::string& call, nvrtcResult rc) const {
        return Error(Errc::kCompileFailed, call + ": " + api.nvrtcGetErrorString(rc));
    }

    // A byte buffer NVRTC fills after telling its size: the cubin, the LTO IR.
    template <class SizeCall, class GetCall>
    Result<std::string> bytes(const char* size_name, SizeCall size_call, const char* get_name,
                              GetCall get_call) const {
        std::size_t size = 0;
        nvrtcResult rc = (api.*size_call)(program, &size);
        if (rc != NVRTC_SUCCESS || size == 0) return failed(size_name, rc);
        std::string out(size, '\0');
        rc = (api.*get_call)(program, out.data());
        if (rc != NVRTC_SUCCESS) return failed(get_name, rc);
        return out;
    }

    std::string log() const {
        std::size_t size = 0;
        if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
        std::string text(size, '\0');
        if (api.nvrtcGetProgramLog(program, text.data()) != NVRTC_SUCCESS) return {};
        text.resize(size - 1);  // drop the terminating NUL
        return text;
    }

    const NvrtcApi& api;
    nvrtcProgram program = nullptr;
};

NvrtcProgram::NvrtcProgram(std::unique_ptr<State> state) : state_(std::move(state)) {}
NvrtcProgram::NvrtcProgram(NvrtcProgram&&) noexcept = default;
NvrtcProgram& NvrtcProgram::operator=(NvrtcProgram&&) noexcept = default;
NvrtcProgram::~NvrtcProgram() = default;

Result<NvrtcProgram> NvrtcProgram::create(
    const std::string& code, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& headers) {
    const auto& loaded = nvrtc_api();
    if (!loaded) return loaded.error();
    auto state = std::make_unique<State>(**loaded);
    std::vector<const char*> header_texts;
    std::vector<const char*> header_names;
    for (const auto& [header_name, text] : headers) {
        header_names.push_back(header_name.c_str());
        header_texts.push_back(text.c_str());
    }
    const nvrtcResult rc = state->api.nvrtcCreateProgram(
        &state->program, code.c_str(), name.c_str(), static_cast<int>(header_texts.size()),
        header_texts.data(), header_names.data());
    if (rc != NVRTC_SUCCESS) return state->failed("nvrtcCreateProgram", rc);
    return NvrtcProgram(std::move(state));
}

Result<void> NvrtcProgram::add_name_expression(const std::string& expression) {
    const nvrtcResult rc = state_->api.nvrtcAddNameExpression(state_->program, expression.c_str());
    if (rc != NVRTC_SUCCESS)
        return state_->failed("nvrtcAddNameExpression(" + expression + ")", rc);
    return ok();
}

NvrtcCompile NvrtcProgram::compile(const std::vector<std::string>& options) {
    std::vector<const char*> pointers;
    pointers.reserve(options.size());
    for (const auto& option : options) pointers.push_back(option.c_str());
    const nvrtcResult rc = state_->api.nvrtcCompileProgram(
        state_->program, static_cast<int>(pointers.size()), pointers.data());
    NvrtcCompile out;
    out.log = state_->log();
    if (rc == NVRTC_SUCCESS) {
        out.status = NvrtcCompile::Status::kSucceeded;
        return out;
    }
    out.status = rc == NVRTC_ERROR_INVALID_OPTION ? NvrtcCompile::Status::kInvalidOption
                                                  : NvrtcCompile::Status::kFailed;
    out.error = state_->api.nvrtcGetErrorString(rc);
    return out;
}

Result<std::string> NvrtcProgram::lowered_name(const std::string& expression) const {
    const char* lowered = nullptr;
    const nvrtcResult rc =
        state_->api.nvrtcGetLoweredName(state_->program, expression.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || lowered == nullptr) {
        return state_->failed("nvrtcGetLoweredName(" + expression + ")", rc);
    }
    return std::string(lowered);
}

Result<std::string> NvrtcProgram::cubin() const {
    return state_->bytes("nvrtcGetCUBINSize", &NvrtcApi::nvrtcGetCUBINSize, "nvrtcGetCUBIN",
                         &NvrtcApi::nvrtcGetCUBIN);
}

Result<std::string> NvrtcProgram::lto_ir() const {
    return state_->bytes("nvrtcGetLTOIRSize", &NvrtcApi::nvrtcGetLTOIRSize, "nvrtcGetLTOIR",
                         &NvrtcApi::nvrtcGetLTOIR);
}

}  // namespace kcache::driver
