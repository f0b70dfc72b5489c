#!POPCORN leaderboard vectoradd
# expect: pass
# requires: cuda
"""CUDA through load_inline: each thread adds 8 halves with one 16-byte load per operand."""

import torch
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor vector_add(torch::Tensor a, torch::Tensor b, torch::Tensor c);"

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_fp16.h>

__global__ void vector_add_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                  __half* __restrict__ c, int64_t n) {
    int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        uint4 va = *reinterpret_cast<const uint4*>(a + i);
        uint4 vb = *reinterpret_cast<const uint4*>(b + i);
        uint4 vc;
        const __half2* ha = reinterpret_cast<const __half2*>(&va);
        const __half2* hb = reinterpret_cast<const __half2*>(&vb);
        __half2* hc = reinterpret_cast<__half2*>(&vc);
#pragma unroll
        for (int k = 0; k < 4; ++k) hc[k] = __hadd2(ha[k], hb[k]);
        *reinterpret_cast<uint4*>(c + i) = vc;
    } else {
        for (int64_t j = i; j < n; ++j) c[j] = __hadd(a[j], b[j]);
    }
}

torch::Tensor vector_add(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && c.is_cuda(), "tensors must be on the GPU");
    TORCH_CHECK(a.scalar_type() == at::kHalf && b.scalar_type() == at::kHalf &&
                c.scalar_type() == at::kHalf, "tensors must be float16");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && c.is_contiguous(),
                "tensors must be contiguous");
    TORCH_CHECK(a.numel() == b.numel() && a.numel() == c.numel(), "sizes differ");
    for (const auto& t : {a, b, c}) {
        TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0,
                    "tensors must be 16-byte aligned");
    }
    const int64_t n = a.numel();
    if (n == 0) return c;
    const int threads = 256;
    const int64_t blocks = (n + threads * 8 - 1) / (threads * 8);
    vector_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
        reinterpret_cast<__half*>(c.data_ptr<at::Half>()), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "vector_add_kernel failed: ", cudaGetErrorString(err));
    return c;
}
"""

module = load_inline(
    name="kernelcup_vectoradd",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["vector_add"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    assert a.dtype == b.dtype == c.dtype == torch.float16
    return module.vector_add(a.contiguous(), b.contiguous(), c)
