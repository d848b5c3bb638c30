// SPDX-License-Identifier: Apache-2.0
// PTX text generators and CPU references for the kcache example kernels (see ptx_kernels.hpp).

#include "ptx_kernels.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::examples {
namespace {

// sm_70 is the oldest target we support; the driver JITs this PTX up to whatever GPU it runs on.
constexpr std::string_view kHeader =
    ".version 7.8\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n";

constexpr double kLog2E = 1.4426950408889634;  // log2(e)
constexpr double kGeluK = 0.7978845608;        // sqrt(2 / pi), as the formula is usually written
constexpr double kGeluC = 0.044715;

// Float immediates are written as exact bit patterns (0fXXXXXXXX) so that no decimal rounding
// happens inside ptxas.
std::string f32_imm(float value) {
    char buf[16];
    const auto bits = static_cast<unsigned>(std::bit_cast<std::uint32_t>(value));
    std::snprintf(buf, sizeof buf, "0f%08X", bits);
    return buf;
}

// Replaces every occurrence of `key` in `text` with `value`.
std::string substitute(std::string text, std::string_view key, std::string_view value) {
    for (std::size_t pos = text.find(key); pos != std::string::npos;
         pos = text.find(key, pos + value.size())) {
        text.replace(pos, key.size(), value);
    }
    return text;
}

std::string module(std::string_view body) {
    std::string text(kHeader);
    text += body;
    return text;
}

}  // namespace

std::string residual_add_ptx() {
    return module(R"(.visible .entry residual_add(
    .param .u64 residual_add_out,
    .param .u64 residual_add_a,
    .param .u64 residual_add_b,
    .param .u32 residual_add_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [residual_add_out];
    ld.param.u64 %rd2, [residual_add_a];
    ld.param.u64 %rd3, [residual_add_b];
    ld.param.u32 %r1, [residual_add_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;

    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd5, %rd7;
    add.s64 %rd9, %rd6, %rd7;
    add.s64 %rd10, %rd4, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;

$L_done:
    ret;
}
)");
}

std::string gelu_ptx() {
    // 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)), so gelu(x) = x / (1 + exp(-2u)). This needs only
    // ex2.approx (tanh.approx.f32 requires sm_75, above our sm_70 target) and, unlike
    // 1 + tanh(u), does not cancel catastrophically for negative x. It also saturates cleanly:
    // for large |x|, x^3 overflows to +-inf and the result becomes x or -0.
    const float neg_2k_log2e = static_cast<float>(-2.0 * kGeluK * kLog2E);
    std::string body = R"(.visible .entry gelu(
    .param .u64 gelu_out,
    .param .u64 gelu_in,
    .param .u32 gelu_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<9>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [gelu_out];
    ld.param.u64 %rd2, [gelu_in];
    ld.param.u32 %r1, [gelu_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;

    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    add.s64 %rd7, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    mul.rn.f32 %f2, %f1, %f1;
    mul.rn.f32 %f3, %f2, %f1;
    fma.rn.f32 %f4, %f3, {GELU_C}, %f1;
    mul.rn.f32 %f5, %f4, {NEG_2K_LOG2E};
    ex2.approx.f32 %f6, %f5;
    add.rn.f32 %f7, %f6, {ONE};
    div.rn.f32 %f8, %f1, %f7;
    st.global.f32 [%rd7], %f8;

$L_done:
    ret;
}
)";
    body = substitute(std::move(body), "{GELU_C}", f32_imm(static_cast<float>(kGeluC)));
    body = substitute(std::move(body), "{NEG_2K_LOG2E}", f32_imm(neg_2k_log2e));
    body = substitute(std::move(body), "{ONE}", f32_imm(1.0f));
    return module(body);
}

std::string softmax_rows_ptx(int cols, std::string_view name) {
    // Row bytes (cols * 4) are used as a 32-bit immediate; 2^28 columns keeps them below 2^31.
    if (cols < 1 || cols > (1 << 28)) {
        throw std::invalid_argument("softmax_rows_ptx: cols must be in [1, 2^28], got " +
                                    std::to_string(cols));
    }
    // Three passes over the row (max, sum, write) with pointer-bumping do-while loops; cols >= 1
    // makes the do-while form safe. The last pass recomputes exp instead of reading back `out`,
    // so the kernel never reads `out` and in-place use (out == in) works.
    std::string body = R"(.visible .entry softmax_rows(
    .param .u64 softmax_rows_out,
    .param .u64 softmax_rows_in,
    .param .u32 softmax_rows_rows
)
{
    .reg .pred %p<5>;
    .reg .b32 %r<6>;
    .reg .f32 %f<10>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [softmax_rows_out];
    ld.param.u64 %rd2, [softmax_rows_in];
    ld.param.u32 %r1, [softmax_rows_rows];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;

    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, {ROW_BYTES};
    add.s64 %rd6, %rd4, %rd5;
    add.s64 %rd7, %rd3, %rd5;
    add.s64 %rd8, %rd6, {ROW_BYTES};

    mov.f32 %f1, {NEG_INF};
    mov.u64 %rd9, %rd6;
$L_max:
    ld.global.f32 %f2, [%rd9];
    max.f32 %f1, %f1, %f2;
    add.s64 %rd9, %rd9, 4;
    setp.lt.u64 %p2, %rd9, %rd8;
    @%p2 bra $L_max;

    mov.f32 %f3, {ZERO};
    mov.u64 %rd9, %rd6;
$L_sum:
    ld.global.f32 %f4, [%rd9];
    sub.rn.f32 %f5, %f4, %f1;
    mul.rn.f32 %f6, %f5, {LOG2E};
    ex2.approx.f32 %f7, %f6;
    add.rn.f32 %f3, %f3, %f7;
    add.s64 %rd9, %rd9, 4;
    setp.lt.u64 %p3, %rd9, %rd8;
    @%p3 bra $L_sum;

    rcp.rn.f32 %f8, %f3;
    mov.u64 %rd9, %rd6;
    mov.u64 %rd10, %rd7;
$L_write:
    ld.global.f32 %f4, [%rd9];
    sub.rn.f32 %f5, %f4, %f1;
    mul.rn.f32 %f6, %f5, {LOG2E};
    ex2.approx.f32 %f7, %f6;
    mul.rn.f32 %f9, %f7, %f8;
    st.global.f32 [%rd10], %f9;
    add.s64 %rd9, %rd9, 4;
    add.s64 %rd10, %rd10, 4;
    setp.lt.u64 %p4, %rd9, %rd8;
    @%p4 bra $L_write;

$L_done:
    ret;
}
)";
    body = substitute(std::move(body), "{ROW_BYTES}", std::to_string(cols * 4));
    body = substitute(std::move(body), "{NEG_INF}", f32_imm(-INFINITY));
    body = substitute(std::move(body), "{ZERO}", f32_imm(0.0f));
    body = substitute(std::move(body), "{LOG2E}", f32_imm(static_cast<float>(kLog2E)));
    if (name != "softmax_rows") body = substitute(std::move(body), "softmax_rows", name);
    return module(body);
}

std::string empty_kernel_ptx() {
    return module(R"(.visible .entry empty_kernel()
{
    ret;
}
)");
}

std::string scale_ptx() {
    return module(R"(.visible .entry scale_kernel(
    .param .u64 scale_kernel_data,
    .param .f32 scale_kernel_factor,
    .param .u32 scale_kernel_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [scale_kernel_data];
    ld.param.f32 %f1, [scale_kernel_factor];
    ld.param.u32 %r1, [scale_kernel_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;

    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;

$L_done:
    ret;
}
)");
}

std::vector<float> residual_add_ref(std::span<const float> a, std::span<const float> b) {
    if (a.size() != b.size()) {
        throw std::invalid_argument("residual_add_ref: a and b differ in size");
    }
    std::vector<float> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        out[i] = a[i] + b[i];
    }
    return out;
}

std::vector<float> gelu_ref(std::span<const float> in) {
    std::vector<float> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        const double x = in[i];
        const double u = kGeluK * (x + kGeluC * x * x * x);
        // For u < 0, 1 + tanh(u) cancels catastrophically even in double (by x ~ -7 no digit is
        // left), so use the exact identity 1 + tanh(u) = 2 / (1 + exp(-2u)) there.
        const double one_plus_tanh =
            u >= 0.0 ? 1.0 + std::tanh(u) : 2.0 / (1.0 + std::exp(-2.0 * u));
        out[i] = static_cast<float>(0.5 * x * one_plus_tanh);
    }
    return out;
}

std::vector<float> softmax_rows_ref(std::span<const float> in, int rows, int cols) {
    if (rows < 0 || cols < 0 ||
        in.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols)) {
        throw std::invalid_argument("softmax_rows_ref: in.size() != rows * cols");
    }
    const auto n_cols = static_cast<std::size_t>(cols);
    std::vector<float> out(in.size());
    std::vector<double> e(n_cols);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
        const std::span<const float> row = in.subspan(r * n_cols, n_cols);
        double max = -INFINITY;
        for (const float x : row) {
            max = std::fmax(max, static_cast<double>(x));
        }
        double sum = 0.0;
        for (std::size_t c = 0; c < n_cols; ++c) {
            e[c] = std::exp(static_cast<double>(row[c]) - max);
            sum += e[c];
        }
        for (std::size_t c = 0; c < n_cols; ++c) {
            out[r * n_cols + c] = static_cast<float>(e[c] / sum);
        }
    }
    return out;
}

std::vector<float> scale_ref(std::span<const float> data, float factor) {
    std::vector<float> out(data.size());
    for (std::size_t i = 0; i < data.size(); ++i) {
        out[i] = data[i] * factor;
    }
    return out;
}

}  // namespace kcache::examples
