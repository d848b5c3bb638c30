// SPDX-License-Identifier: Apache-2.0
// Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from kcache's own encoders, so
// that every seed is an input kcache really reads: `kcache_fuzz_seeds fuzz/corpus`.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "compile/ptx_params.hpp"
#include "compile/worker_protocol.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"

namespace {

using namespace kcache;
using namespace std::string_literals;

std::filesystem::path g_root;

void put(const std::string& target, const std::string& name, std::string_view bytes) {
    const std::filesystem::path folder = g_root / target;
    std::filesystem::create_directories(folder);
    std::ofstream out(folder / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

store::Artifact cubin_entry() {
    store::Artifact entry;
    entry.kind = store::PayloadKind::kCubin;
    entry.key.arch = "sm_90";
    entry.key.source_kind = "cuda";
    entry.key.source_hash = "0123456789abcdef0123456789abcdef";
    entry.key.options = "-std=c++17 -DN=4";
    entry.key.names = "fill<float, 4>; g<1>";
    entry.key.toolchain = "NVRTC build-id 65be0d; format 4";
    entry.key.caller_key = "softmax:32";
    entry.key.kernel_names = {"softmax_rows", "softmax_rows_tail"};
    entry.payload = "\177ELF\2\1\1"s + std::string(64, 'x');
    return entry;
}

store::Artifact ptx_entry() {
    const std::string ptx = examples::residual_add_ptx();
    store::Artifact entry;
    entry.kind = store::PayloadKind::kPtx;
    entry.key.arch = "sm_70";
    entry.key.source_kind = "ptx";
    entry.key.source_hash = "fedcba9876543210fedcba9876543210";
    entry.key.toolchain = "nvJitLink 12.8; format 4";
    entry.key.caller_key = "residual_add";
    entry.key.param_sizes = compile::param_sizes_line(compile::ptx_param_sizes(ptx));
    entry.key.kernel_names = {"residual_add"};
    entry.payload = ptx;
    return entry;
}

void entries() {
    const store::Artifact cubin = cubin_entry();
    put("entry_format", "cubin_raw", store::encode(cubin));
    put("entry_format", "cubin_zstd", store::encode(cubin, store::Compression::kZstd));
    put("entry_format", "ptx_raw", store::encode(ptx_entry()));
    store::Artifact empty = cubin;
    empty.kind = store::PayloadKind::kFatbin;
    empty.payload.clear();
    empty.key.kernel_names.clear();
    put("entry_format", "fatbin_empty_no_kernels", store::encode(empty));

    put("key_material", "cuda", cubin.key.serialize());
    put("key_material", "ptx_with_param_sizes", ptx_entry().key.serialize());
    put("key_material", "no_kernels", empty.key.serialize());
}

// Frames as a worker's pipe carries them, written by write_frame itself.
std::string framed(const std::vector<std::string>& payloads) {
    char name[] = "/tmp/kcache-fuzz-seed-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) return {};
    for (const std::string& payload : payloads) std::ignore = compile::write_frame(fd, payload);
    std::string bytes;
    char buffer[4096];
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
        bytes.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    ::unlink(name);
    return bytes;
}

void worker_protocol() {
    compile::CompileRequest request;
    request.program.name = "sample.cu";
    request.program.code = "extern \"C\" __global__ void k() {}\n";
    request.program.headers = {{"a.h", "#define A 1\n"}, {"dir/b.h", ""}};
    request.program.options = {"-DX=1", "-std=c++17"};
    request.program.name_expressions = {"fill<float, 4>"};
    request.target = compile::Target{90, true};
    compile::Compiled compiled;
    compiled.cubin = "\177ELF\2\1\1"s;
    compiled.log = "warning: something";
    compiled.lowered_names = {{"fill<float, 4>", "_Z4fillIfLi4EEvPT_"}};
    const compile::CompileResponse failed(
        Error(Errc::kCompileFailed, "kernel.cu(1): error", "1 error detected"));
    const compile::WorkerHello hello{"NVRTC build-id 65be0d", "nvJitLink build-id 9a41c3"};
    const compile::LinkRequest link{examples::residual_add_ptx(), compile::Target{90, false}};

    const std::string request_bytes = compile::encode_request(request);
    const std::string response_bytes = compile::encode_response(compile::CompileResponse(compiled));
    const std::string hello_bytes = compile::encode_hello(hello);
    put("worker_protocol", "request", request_bytes);
    put("worker_protocol", "link_request", compile::encode_link_request(link));
    put("worker_protocol", "response_ok", response_bytes);
    put("worker_protocol", "response_error", compile::encode_response(failed));
    put("worker_protocol", "hello", hello_bytes);
    put("worker_protocol", "stream_hello_request", framed({hello_bytes, request_bytes}));
    put("worker_protocol", "stream_response", framed({response_bytes}));
}

void ptx() {
    put("ptx_params", "residual_add.ptx", examples::residual_add_ptx());
    put("ptx_params", "gelu.ptx", examples::gelu_ptx());
    put("ptx_params", "softmax_rows_32.ptx", examples::softmax_rows_ptx(32));
    put("ptx_params", "empty_kernel.ptx", examples::empty_kernel_ptx());
    put("ptx_params", "scale.ptx", examples::scale_ptx());
    compile::PtxParamSizes all;
    for (const std::string& module : {examples::residual_add_ptx(), examples::gelu_ptx(),
                                      examples::scale_ptx(), examples::empty_kernel_ptx()}) {
        for (auto& kernel : compile::ptx_param_sizes(module)) all.push_back(kernel);
    }
    std::sort(all.begin(), all.end());
    put("ptx_params", "param_sizes_line", compile::param_sizes_line(all));
}

void values() {
    const char* const texts[] = {
        "4Gi", "512M", "1.5 GiB", "0",           "1024",  "18446744073709551615",
        "yes", "Off",  "true",    "/tmp/kcache", "debug", "2.5T"};
    int i = 0;
    for (const char* text : texts) put("values", "value_" + std::to_string(i++), text);
    put("values", "fingerprint", "0123456789abcdef0123456789abcdef");  // a key index record's
}

void config_file() {
    put("config_file", "budgets",
        "# budgets for this directory\nmax_size = 10Gi\nmax_files = 5000\n\nverify = 1\n");
    put("config_file", "workers", "compile_workers = 4\nlog = info\nmax_entries=64\n");
    put("config_file", "refused", "dir = /elsewhere\nnvrtc_library = /tmp/libnvrtc.so\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
        return 2;
    }
    g_root = argv[1];
    entries();
    worker_protocol();
    ptx();
    values();
    config_file();
    return 0;
}
