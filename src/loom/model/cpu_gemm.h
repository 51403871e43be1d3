#pragma once
// Matrix products of float32 CPU tensors through oneDNN or through libtorch's BLAS.
//
// libtorch computes float32 products on the CPU with its BLAS, MKL in the x86 wheel. MKL runs
// its AVX-512 kernels only on Intel processors: on an AMD one with AVX-512 (Zen 4, Zen 5) it
// reaches about half of what oneDNN, which libtorch also links (and uses for bf16 and fp16
// products), reaches on the same shapes (bench/cpu_gemm.cpp, docs/notes/results.md). The
// models' linear layers and loom's weight-gradient products therefore go through linear() and
// gemm_into(), which take oneDNN when train.cpu_gemm says so. Other devices, other types and
// autocast regions go through libtorch as before.
#include <ATen/core/Tensor.h>

#include <string>

#include "loom/config/config.h"

namespace loom::model {

// The library for this process's products from now on (the trainer sets train.cpu_gemm
// before the model is built). auto: oneDNN when this libtorch has it and the CPU has the
// AVX-512 (BW, VL, DQ) its float32 kernels need, else the BLAS. Throws UsageError when onednn
// is asked for and cannot run here.
void use_cpu_gemm(config::CpuGemm choice);
// "onednn" or "blas": what float32 CPU products use now.
std::string cpu_gemm_in_use();

// Whether products of these tensors (c may be undefined) go through oneDNN now: float32 CPU
// tensors, oneDNN chosen, outside an autocast region (which wants libtorch's bf16 products).
bool onednn_takes(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c = {});

// out = alpha a b (beta 0) or out + alpha a b (beta 1): a [m, k], b [k, n], out [m, n], any
// strides; or batches of them, a [B, m, k], b [B, k, n], out [B, m, n], each contiguous or
// with its last two dimensions transposed (others are copied).
void gemm_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, float beta,
               float alpha = 1.f);

// x w^T + bias over x's last dimension (bias may be undefined), differentiable, the values of
// torch's linear within float32 rounding; inside an autocast region autocast_linear.h's.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace loom::model
