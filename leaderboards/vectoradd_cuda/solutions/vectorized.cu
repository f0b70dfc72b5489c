//!POPCORN leaderboard vectoradd_cuda
// expect: pass
// Each thread adds 8 halves through one 16-byte load per operand and one 16-byte store,
// streaming past L1 (the data is touched once); the last n % 8 elements are done one by one.

#include <cuda_fp16.h>

#include "task.h"

__global__ void add_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                           __half* __restrict__ c, int64_t n) {
    const int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 8;
    if (i + 8 <= n) {
        const uint4 va = __ldcs(reinterpret_cast<const uint4*>(a + i));
        const uint4 vb = __ldcs(reinterpret_cast<const uint4*>(b + i));
        uint4 vc;
        const __half2* ha = reinterpret_cast<const __half2*>(&va);
        const __half2* hb = reinterpret_cast<const __half2*>(&vb);
        __half2* hc = reinterpret_cast<__half2*>(&vc);
#pragma unroll
        for (int k = 0; k < 4; ++k) hc[k] = __hadd2(ha[k], hb[k]);
        __stcs(reinterpret_cast<uint4*>(c + i), vc);
    } else {
        for (int64_t j = i; j < n; ++j) c[j] = __hadd(a[j], b[j]);
    }
}

void custom_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads * 8 - 1) / (threads * 8);
    add_kernel<<<static_cast<unsigned int>(blocks), threads>>>(a, b, c, n);
}
