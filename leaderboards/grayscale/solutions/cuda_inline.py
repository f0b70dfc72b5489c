#!POPCORN leaderboard grayscale
# expect: pass
# requires: cuda
"""CUDA through load_inline: each thread converts 4 pixels, reading their 12 floats as three
16-byte loads and writing one 16-byte store."""

import torch
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor grayscale(torch::Tensor rgb, torch::Tensor gray);"

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__device__ __forceinline__ float luma(float r, float g, float b) {
    return 0.2989f * r + 0.5870f * g + 0.1140f * b;
}

__global__ void grayscale_kernel(const float* __restrict__ rgb, float* __restrict__ gray,
                                 int64_t pixels) {
    int64_t p = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
    if (p + 4 <= pixels) {
        // 4 pixels = 12 floats = 48 bytes, 16-byte aligned because p is a multiple of 4.
        const float4* src = reinterpret_cast<const float4*>(rgb + 3 * p);
        float4 a = __ldcs(src), b = __ldcs(src + 1), c = __ldcs(src + 2);
        float4 out = make_float4(luma(a.x, a.y, a.z), luma(a.w, b.x, b.y),
                                 luma(b.z, b.w, c.x), luma(c.y, c.z, c.w));
        __stcs(reinterpret_cast<float4*>(gray + p), out);
    } else {
        for (int64_t q = p; q < pixels; ++q) {
            gray[q] = luma(rgb[3 * q], rgb[3 * q + 1], rgb[3 * q + 2]);
        }
    }
}

torch::Tensor grayscale(torch::Tensor rgb, torch::Tensor gray) {
    TORCH_CHECK(rgb.is_cuda() && gray.is_cuda(), "tensors must be on the GPU");
    TORCH_CHECK(rgb.scalar_type() == at::kFloat && gray.scalar_type() == at::kFloat,
                "tensors must be float32");
    TORCH_CHECK(rgb.is_contiguous() && gray.is_contiguous(), "tensors must be contiguous");
    TORCH_CHECK(rgb.numel() == 3 * gray.numel(), "rgb must have 3 values per pixel");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(rgb.data_ptr()) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(gray.data_ptr()) % 16 == 0,
                "tensors must be 16-byte aligned");
    const int64_t pixels = gray.numel();
    if (pixels == 0) return gray;
    const int threads = 256;
    const int64_t blocks = (pixels + threads * 4 - 1) / (threads * 4);
    grayscale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        rgb.data_ptr<float>(), gray.data_ptr<float>(), pixels);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "grayscale_kernel failed: ", cudaGetErrorString(err));
    return gray;
}
"""

module = load_inline(
    name="kernelcup_grayscale",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["grayscale"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    rgb, gray = data
    assert rgb.dtype == gray.dtype == torch.float32
    return module.grayscale(rgb.contiguous(), gray)
