//!POPCORN leaderboard vectoradd_cuda
// expect: fail
// Wrong: the grid is n / threads blocks, rounded down, so when n is not a multiple of 256 the
// last partial block is never launched and the tail keeps the driver's NaN.

#include <cuda_fp16.h>

#include "task.h"

__global__ void add_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) c[i] = __hadd(a[i], b[i]);
}

void custom_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    const int threads = 256;
    const int64_t blocks = n / threads;
    if (blocks > 0) add_kernel<<<static_cast<unsigned int>(blocks), threads>>>(a, b, c, n);
}
