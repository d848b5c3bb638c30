// SPDX-License-Identifier: Apache-2.0
// Issue 19, the CUDA C++ part of the corpus (scripts/make-cuda-corpus.py): its kernels.tsv read
// into a KernelSet (each kernel its own Source, as an engine that JITs one instantiation at a time
// asks for it), and a GPU check that a sample of them computes what a CPU reference does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <span>
#include <sstream>
#include <type_traits>

#include "bench/bench.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "util/try.hpp"

namespace kcache::bench {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, separator)) {
        if (!part.empty()) parts.push_back(part);
    }
    return parts;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
    for (std::size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
    return text;
}

std::optional<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in.is_open()) return std::nullopt;
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

bool is_cuda_corpus(const std::string& directory) {
    return std::filesystem::is_regular_file(std::filesystem::path(directory) / "kernels.tsv");
}

std::optional<std::vector<CudaCorpusKernel>> read_cuda_corpus(const std::string& directory,
                                                              std::string& note) {
    const std::string index = directory + "/kernels.tsv";
    std::ifstream in(index);
    if (!in.is_open()) {
        note = "cannot read " + index;
        return std::nullopt;
    }
    const std::string include = cuda_include_root();
    std::vector<CudaCorpusKernel> kernels;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (line.empty()) continue;
        std::vector<std::string> fields;
        std::stringstream row(line);
        std::string field;
        while (std::getline(row, field, '\t')) fields.push_back(field);
        if (fields.size() != 7) {
            note = index + ":" + std::to_string(number) + ": not 7 tab-separated fields";
            return std::nullopt;
        }
        CudaCorpusKernel kernel{
            fields[0], fields[1], fields[2], fields[3], std::atoi(fields[4].c_str()),
            fields[5], {}};
        for (const std::string& option : split(fields[6], ' ')) {
            kernel.options.push_back(replace_all(option, "$CUDA_INCLUDE", include));
        }
        kernels.push_back(std::move(kernel));
    }
    if (kernels.empty()) {
        note = index + ": no kernels";
        return std::nullopt;
    }
    return kernels;
}

std::optional<KernelSet> cuda_corpus_set(const std::string& directory, std::string& note) {
    auto kernels = read_cuda_corpus(directory, note);
    if (!kernels) return std::nullopt;
    KernelSet set;
    set.launchable = false;  // each takes arguments of its own: loaded, not launched
    for (const CudaCorpusKernel& kernel : *kernels) {
        auto code = read_text(directory + "/" + kernel.file);
        if (!code) {
            note = "cannot read " + directory + "/" + kernel.file;
            return std::nullopt;
        }
        Source source = Source::cuda(std::move(*code), kernel.options, {kernel.expression});
        source.arch_specific = true;  // the corpus is sm_90a's, as the Triton corpus is
        set.cuda.push_back(std::move(source));
        set.keys.push_back("cuda-corpus:" + kernel.file + ":" + kernel.expression);
        set.names.push_back(kernel.expression);
        set.arch_specific.push_back(true);
    }
    return set;
}

namespace {

// Inputs the same on every run: a linear congruential sequence in [-1, 1).
std::vector<float> known_floats(std::size_t count, std::uint32_t seed) {
    std::vector<float> out(count);
    for (float& value : out) {
        seed = seed * 1664525u + 1013904223u;
        value = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
    }
    return out;
}

std::uint16_t to_bf16(float value) {  // round to nearest even, as __float2bfloat16 does
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t value) {
    const std::uint32_t bits = std::uint32_t{value} << 16;
    float out = 0;
    std::memcpy(&out, &bits, 4);
    return out;
}

// DeviceBuffer moves floats; any element type goes as its bytes.
template <class T>
Result<driver::DeviceBuffer> to_device(const std::vector<T>& data) {
    const std::size_t bytes = std::max<std::size_t>(4, (data.size() * sizeof(T) + 3) / 4 * 4);
    std::vector<float> words(bytes / 4);
    std::memcpy(words.data(), data.data(), data.size() * sizeof(T));
    TRY_ASSIGN(auto buffer, driver::DeviceBuffer::allocate(bytes));
    TRY(buffer.upload(words));
    return buffer;
}

template <class T>
Result<std::vector<T>> from_device(const driver::DeviceBuffer& buffer, std::size_t count) {
    TRY_ASSIGN(const std::vector<float> words, buffer.download_floats());
    if (words.size() * 4 < count * sizeof(T)) return Error(Errc::kDriverError, "short download");
    std::vector<T> out(count);
    std::memcpy(out.data(), words.data(), count * sizeof(T));
    return out;
}

using Compared = std::pair<std::vector<float>, std::vector<float>>;

// Launches `blocks` blocks of `block` threads (one dimension each) and reads `want.size()` floats
// of `out` back, beside `want`: the tail most checks share.
Result<Compared> launch_and_compare(const KernelHandle& kernel, unsigned blocks, unsigned block,
                                    std::span<void* const> args, const driver::DeviceBuffer& out,
                                    std::vector<float> want) {
    LaunchConfig config;
    config.grid = {blocks, 1, 1};
    config.block = {block, 1, 1};
    TRY(kernel.launch(config, args));
    TRY_ASSIGN(auto got, from_device<float>(out, want.size()));
    return Compared{std::move(got), std::move(want)};
}

// The largest |got - want| / max(1, |want|); a count mismatch is infinite.
double worst_error(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return INFINITY;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double error = std::abs(static_cast<double>(got[i]) - want[i]) /
                             std::max(1.0, std::abs(static_cast<double>(want[i])));
        worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    }
    return worst;
}

struct Check {
    std::string expression;
    double tolerance;
    // Launches the kernel on its inputs; returns (got, want) or an error.
    std::function<Result<std::pair<std::vector<float>, std::vector<float>>>(const KernelHandle&)>
        run;
};

unsigned blocks_for(std::size_t count, std::size_t per_block) {
    return static_cast<unsigned>((count + per_block - 1) / per_block);
}

float gelu(float x) {
    return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}

// C = act(A * B + bias) for float storage or bf16 storage (inputs rounded as the device sees them).
template <bool kBf16>
Check gemm_check(const std::string& expression, int tile_m, int tile_n, bool use_gelu) {
    return {expression, kBf16 ? 3e-2 : 1e-4,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int m = 130, n = 129, k = 70;  // not multiples of any tile
                std::vector<float> a = known_floats(std::size_t(m) * k, 1);
                std::vector<float> b = known_floats(std::size_t(k) * n, 2);
                std::vector<float> bias = known_floats(std::size_t(n), 3);
                std::vector<float> want(std::size_t(m) * n);
                auto stored = [](float x) { return kBf16 ? from_bf16(to_bf16(x)) : x; };
                for (std::vector<float>* v : {&a, &b, &bias})
                    for (float& x : *v) x = stored(x);
                for (int i = 0; i < m; ++i) {
                    for (int j = 0; j < n; ++j) {
                        float sum = 0;
                        for (int p = 0; p < k; ++p) sum += a[i * k + p] * b[p * n + j];
                        sum += bias[j];
                        want[i * n + j] = use_gelu ? gelu(sum) : std::max(sum, 0.0f);
                    }
                }
                auto device = [&](const std::vector<float>& v) {
                    if constexpr (kBf16) {
                        std::vector<std::uint16_t> h(v.size());
                        std::transform(v.begin(), v.end(), h.begin(), to_bf16);
                        return to_device(h);
                    } else {
                        return to_device(v);
                    }
                };
                TRY_ASSIGN(auto da, device(a));
                TRY_ASSIGN(auto db, device(b));
                TRY_ASSIGN(auto dbias, device(bias));
                TRY_ASSIGN(auto dc, device(std::vector<float>(want.size(), 0.0f)));
                std::uint64_t pa = da.address(), pb = db.address(), pbias = dbias.address(),
                              pc = dc.address();
                int mm = m, nn = n, kk = k;
                void* args[] = {&pa, &pb, &pbias, &pc, &mm, &nn, &kk};
                LaunchConfig config;
                config.grid = {blocks_for(std::size_t(n), std::size_t(tile_n)),
                               blocks_for(std::size_t(m), std::size_t(tile_m)), 1};
                config.block = {256, 1, 1};
                TRY(kernel.launch(config, args));
                std::vector<float> got;
                if constexpr (kBf16) {
                    TRY_ASSIGN(auto h, from_device<std::uint16_t>(dc, want.size()));
                    got.resize(h.size());
                    std::transform(h.begin(), h.end(), got.begin(), from_bf16);
                } else {
                    TRY_ASSIGN(got, from_device<float>(dc, want.size()));
                }
                return std::pair{std::move(got), std::move(want)};
            }};
}

Check softmax_check(const std::string& expression, unsigned block) {
    return {expression, 1e-5,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int rows = 8, cols = 1000;
                std::vector<float> in = known_floats(std::size_t(rows) * cols, 4);
                for (float& x : in) x *= 8.0f;
                std::vector<float> want(in.size());
                for (int r = 0; r < rows; ++r) {
                    const float* row = &in[std::size_t(r) * cols];
                    const float best = *std::max_element(row, row + cols);
                    double sum = 0;
                    for (int c = 0; c < cols; ++c) sum += std::exp(row[c] - best);
                    for (int c = 0; c < cols; ++c) {
                        want[std::size_t(r) * cols + c] =
                            static_cast<float>(std::exp(row[c] - best) / sum);
                    }
                }
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(in.size(), 0.0f)));
                std::uint64_t pin = din.address(), pout = dout.address();
                int c = cols;
                void* args[] = {&pin, &pout, &c};
                return launch_and_compare(kernel, static_cast<unsigned>(rows), block, args, dout,
                                          std::move(want));
            }};
}

Check layernorm_check(const std::string& expression, unsigned block) {
    return {expression, 1e-4,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int rows = 4, cols = 1024;
                const float eps = 1e-5f;
                std::vector<float> in = known_floats(std::size_t(rows) * cols, 5);
                std::vector<float> gamma = known_floats(std::size_t(cols), 6);
                std::vector<float> beta = known_floats(std::size_t(cols), 7);
                std::vector<float> want(in.size());
                for (int r = 0; r < rows; ++r) {
                    const float* row = &in[std::size_t(r) * cols];
                    double mean = std::accumulate(row, row + cols, 0.0) / cols, squares = 0;
                    for (int c = 0; c < cols; ++c) squares += (row[c] - mean) * (row[c] - mean);
                    const double rstd = 1.0 / std::sqrt(squares / cols + eps);
                    for (int c = 0; c < cols; ++c) {
                        want[std::size_t(r) * cols + c] =
                            static_cast<float>((row[c] - mean) * rstd * gamma[c] + beta[c]);
                    }
                }
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dgamma, to_device(gamma));
                TRY_ASSIGN(auto dbeta, to_device(beta));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(in.size(), 0.0f)));
                std::uint64_t pin = din.address(), pgamma = dgamma.address(),
                              pbeta = dbeta.address(), pout = dout.address();
                int c = cols;
                float e = eps;
                void* args[] = {&pin, &pgamma, &pbeta, &pout, &c, &e};
                return launch_and_compare(kernel, static_cast<unsigned>(rows), block, args, dout,
                                          std::move(want));
            }};
}

Check rmsnorm_check(const std::string& expression, unsigned block) {
    return {expression, 1e-4,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int rows = 4, cols = 1000;
                const float eps = 1e-6f;
                std::vector<float> in = known_floats(std::size_t(rows) * cols, 12);
                std::vector<float> weight = known_floats(std::size_t(cols), 13);
                std::vector<float> want(in.size());
                for (int r = 0; r < rows; ++r) {
                    const float* row = &in[std::size_t(r) * cols];
                    double squares = 0;
                    for (int c = 0; c < cols; ++c) squares += double(row[c]) * row[c];
                    const double scale = 1.0 / std::sqrt(squares / cols + eps);
                    for (int c = 0; c < cols; ++c) {
                        want[std::size_t(r) * cols + c] =
                            static_cast<float>(row[c] * scale * weight[c]);
                    }
                }
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dweight, to_device(weight));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(in.size(), 0.0f)));
                std::uint64_t pin = din.address(), pweight = dweight.address(),
                              pout = dout.address();
                int c = cols;
                float e = eps;
                void* args[] = {&pin, &pweight, &pout, &c, &e};
                return launch_and_compare(kernel, static_cast<unsigned>(rows), block, args, dout,
                                          std::move(want));
            }};
}

// block_reduce_sum<T, BLOCK, ITEMS>(const T* in, float* out, int n), T float or int.
template <class T>
Check reduce_check(const std::string& expression, unsigned block, unsigned items) {
    return {expression, 1e-4,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int n = 5000;
                const std::size_t per_block = std::size_t(block) * items;
                std::vector<float> source = known_floats(std::size_t(n), 8);
                std::vector<T> in(source.size());
                for (std::size_t i = 0; i < in.size(); ++i) {
                    in[i] = std::is_integral_v<T> ? static_cast<T>(source[i] * 1000) : source[i];
                }
                const unsigned blocks = blocks_for(in.size(), per_block);
                std::vector<double> sums(blocks, 0.0);
                for (std::size_t i = 0; i < in.size(); ++i) sums[i / per_block] += in[i];
                std::vector<float> want(sums.begin(), sums.end());
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(blocks, 0.0f)));
                std::uint64_t pin = din.address(), pout = dout.address();
                int count = n;
                void* args[] = {&pin, &pout, &count};
                return launch_and_compare(kernel, blocks, block, args, dout, std::move(want));
            }};
}

// block_inclusive_scan<int, BLOCK, ITEMS> and block_radix_sort_keys<int, BLOCK, ITEMS>: whole
// tiles of ints in, each tile scanned or sorted.
Check tile_check(const std::string& expression, unsigned block, unsigned items, bool sort) {
    return {expression, 0,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const std::size_t per_block = std::size_t(block) * items, tiles = 3;
                std::vector<float> source = known_floats(per_block * tiles, 9);
                std::vector<int> in(source.size());
                for (std::size_t i = 0; i < in.size(); ++i) {
                    in[i] = static_cast<int>(source[i] * 100000);
                }
                std::vector<int> want = in;
                for (std::size_t t = 0; t < tiles; ++t) {
                    auto first = want.begin() + static_cast<std::ptrdiff_t>(t * per_block);
                    auto last = first + static_cast<std::ptrdiff_t>(per_block);
                    if (sort) {
                        std::sort(first, last);
                    } else {
                        std::partial_sum(first, last, first);
                    }
                }
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dout, to_device(std::vector<int>(in.size(), 0)));
                std::uint64_t pin = din.address(), pout = dout.address();
                std::vector<void*> args = {&pin};
                if (!sort) args.push_back(&pout);
                LaunchConfig config;
                config.grid = {static_cast<unsigned>(tiles), 1, 1};
                config.block = {block, 1, 1};
                TRY(kernel.launch(config, args));
                TRY_ASSIGN(auto got, from_device<int>(sort ? din : dout, want.size()));
                return std::pair{std::vector<float>(got.begin(), got.end()),
                                 std::vector<float>(want.begin(), want.end())};
            }};
}

Check warp_reduce_check(const std::string& expression, unsigned block) {
    return {expression, 1e-5,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const unsigned blocks = 3;
                std::vector<float> in = known_floats(std::size_t(block) * blocks, 10);
                std::vector<float> want(in.size() / 32, 0.0f);
                for (std::size_t i = 0; i < in.size(); ++i) want[i / 32] += in[i];
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(want.size(), 0.0f)));
                std::uint64_t pin = din.address(), pout = dout.address();
                void* args[] = {&pin, &pout};
                return launch_and_compare(kernel, blocks, block, args, dout, std::move(want));
            }};
}

Check scale_copy_check(const std::string& expression, unsigned block, unsigned items) {
    return {expression, 1e-6,
            [=](const KernelHandle& kernel)
                -> Result<std::pair<std::vector<float>, std::vector<float>>> {
                const int n = 3000;  // the last tile partial
                std::vector<float> in = known_floats(std::size_t(n), 11);
                std::vector<float> want(in.size());
                const float alpha = 1.5f;
                std::transform(in.begin(), in.end(), want.begin(),
                               [&](float x) { return alpha * x; });
                TRY_ASSIGN(auto din, to_device(in));
                TRY_ASSIGN(auto dout, to_device(std::vector<float>(in.size(), 0.0f)));
                std::uint64_t pin = din.address(), pout = dout.address();
                float a = alpha;
                int count = n;
                void* args[] = {&pin, &pout, &a, &count};
                return launch_and_compare(kernel, blocks_for(in.size(), std::size_t(block) * items),
                                          block, args, dout, std::move(want));
            }};
}

std::vector<Check> sample_checks() {
    return {
        gemm_check<false>("gemm_bias_act<float, 64, 64, 16, 4, 4, BiasRelu>", 64, 64, false),
        gemm_check<false>("gemm_bias_act<float, 128, 128, 32, 8, 8, BiasGelu>", 128, 128, true),
        gemm_check<true>("gemm_bias_act<__nv_bfloat16, 128, 64, 32, 8, 4, BiasGelu>", 128, 64,
                         true),
        softmax_check("softmax_rows<float, 256>", 256),
        softmax_check("softmax_rows<float, 1024>", 1024),
        layernorm_check("layernorm_rows<float, 512>", 512),
        rmsnorm_check("rmsnorm_rows<float, 256>", 256),
        reduce_check<float>("block_reduce_sum<float, 256, 4>", 256, 4),
        reduce_check<int>("block_reduce_sum<int, 128, 4>", 128, 4),
        tile_check("block_inclusive_scan<int, 256, 4>", 256, 4, false),
        tile_check("block_radix_sort_keys<int, 256, 4>", 256, 4, true),
        warp_reduce_check("warp_reduce_sum<float, 256>", 256),
        scale_copy_check(
            "scale_copy<float, 256, 4, cub::BLOCK_LOAD_TRANSPOSE, cub::BLOCK_STORE_TRANSPOSE>", 256,
            4),
    };
}

}  // namespace

std::string check_cuda_corpus(const std::string& directory, const std::string& cache_directory,
                              std::string& note) {
    std::optional<KernelSet> read = cuda_corpus_set(directory, note);
    if (!read) return {};
    KernelSet& set = *read;
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message();
        return {};
    }
    (void)context->make_current();
    CacheOptions options;
    options.disk_directory = cache_directory;
    KernelCache cache(options);
    std::string text =
        "| kernel (launched on known inputs, against a CPU reference) | worst relative error | "
        "bound | |\n|---|---:|---:|---|\n";
    int passed = 0;
    const std::vector<Check> checks = sample_checks();
    for (const Check& check : checks) {
        auto at = std::find(set.names.begin(), set.names.end(), check.expression);
        if (at == set.names.end()) {
            if (note.empty()) note = check.expression + " is not in the corpus";
            continue;
        }
        const int i = static_cast<int>(at - set.names.begin());
        auto kernel = cache.kernel(set.key(i), set.handing_over(i), set.name(i));
        Result<std::pair<std::vector<float>, std::vector<float>>> ran =
            kernel ? check.run(*kernel)
                   : Result<std::pair<std::vector<float>, std::vector<float>>>(kernel.error());
        if (ran) {
            if (auto synced = context->synchronize(); !synced) ran = synced.error();
        }
        if (!ran) {
            append(text, "| `%s` | - | - | FAILED: %s |\n", check.expression.c_str(),
                   ran.error().message().c_str());
            if (note.empty()) note = check.expression + ": " + ran.error().describe();
            continue;
        }
        const double error = worst_error(ran->first, ran->second);
        const bool ok = error <= check.tolerance;
        passed += ok ? 1 : 0;
        append(text, "| `%s` | %.2g | %.0g | %s |\n", check.expression.c_str(), error,
               check.tolerance, ok ? "ok" : "MISMATCH");
        if (!ok && note.empty()) note = check.expression + ": results differ from the reference";
    }
    append(text, "\n- %d of %zu sampled kernels match the CPU reference\n", passed, checks.size());
    return text;
}

}  // namespace kcache::bench
