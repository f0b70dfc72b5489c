//!POPCORN leaderboard vectoradd_cuda
// Hostile: a correct kernel whose static destructor, run at exit after the driver has written
// its report, appends forged timings to the same report (POPCORN_FD). Expected: FAILED, the
// report names a key written twice.

#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>

#include "task.h"

__global__ void add_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) c[i] = __hadd(a[i], b[i]);
}

void custom_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    add_kernel<<<static_cast<unsigned int>(blocks), threads>>>(a, b, c, n);
}

namespace {
struct Forger {
    ~Forger() {
        const char* fd = std::getenv("POPCORN_FD");
        if (fd != nullptr) dprintf(std::atoi(fd), "benchmark.0.durations: 20000,20000,20000\n");
    }
} forger;
}  // namespace
