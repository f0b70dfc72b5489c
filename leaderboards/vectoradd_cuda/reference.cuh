// vectoradd_cuda: inputs, reference and check, all on the device so that checking every timed
// call stays cheap at 10^8 elements.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace reference {

constexpr float ATOL = 1e-3f;
constexpr float RTOL = 1e-3f;
constexpr int THREADS = 256;
constexpr int MAX_EXAMPLES = 5;

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A CUDA call that failed; after the submission ran, usually its fault (a sticky error).
struct CudaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void check(cudaError_t error, const char* what) {
    if (error != cudaSuccess) {
        throw CudaError(std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")");
    }
}

inline float float_from_bits(unsigned int bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

inline int blocks_for(int64_t n) {
    return static_cast<int>(std::min<int64_t>((n + THREADS - 1) / THREADS, 1 << 16));
}

// Uniform values in [-4, 4), a pure function of (seed, stream, index): the same seed gives
// the same input on every GPU and in every process.
__global__ void fill_uniform(__half* x, int64_t n, uint64_t seed, uint64_t stream) {
    const uint64_t key = splitmix64(seed ^ splitmix64(stream));
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const uint64_t bits = splitmix64(key ^ static_cast<uint64_t>(i));
        const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // 24 bits
        x[i] = __float2half_rn(8.0f * u - 4.0f);
    }
}

__global__ void add_reference(const __half* a, const __half* b, __half* out, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        out[i] = __float2half_rn(__half2float(a[i]) + __half2float(b[i]));
    }
}

struct Mismatch {
    int64_t index;
    float got;
    float expected;
};

struct Tally {
    unsigned long long count;
    unsigned int max_diff_bits;  // a non-negative float's bits order like the float
    Mismatch examples[MAX_EXAMPLES];
};

__global__ void compare(const __half* got, const __half* expected, int64_t n, Tally* tally) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float g = __half2float(got[i]);
        const float e = __half2float(expected[i]);
        const float diff = fabsf(g - e);
        if (!(diff <= ATOL + RTOL * fabsf(e))) {  // NaN fails this test too
            const unsigned long long k = atomicAdd(&tally->count, 1ull);
            if (k < MAX_EXAMPLES) tally->examples[k] = {i, g, e};
            atomicMax(&tally->max_diff_bits, __float_as_uint(isnan(diff) ? INFINITY : diff));
        }
    }
}

// Device buffers for one case: inputs, the submission's output and the expected output.
class Problem {
  public:
    explicit Problem(int64_t n) : n_(n) {
        const size_t bytes = static_cast<size_t>(n) * sizeof(__half);
        check(cudaMalloc(&a_, bytes), "cudaMalloc");
        check(cudaMalloc(&b_, bytes), "cudaMalloc");
        check(cudaMalloc(&c_, bytes), "cudaMalloc");
        check(cudaMalloc(&expected_, bytes), "cudaMalloc");
        check(cudaMalloc(&tally_, sizeof(Tally)), "cudaMalloc");
    }
    ~Problem() {
        cudaFree(a_);
        cudaFree(b_);
        cudaFree(c_);
        cudaFree(expected_);
        cudaFree(tally_);
    }
    Problem(const Problem&) = delete;
    Problem& operator=(const Problem&) = delete;

    const __half* a() const { return a_; }
    const __half* b() const { return b_; }
    __half* c() const { return c_; }
    int64_t n() const { return n_; }

    // New inputs for this seed, their expected sum, and an output full of NaN (0xFFFF).
    void generate(uint64_t seed) {
        fill_uniform<<<blocks_for(n_), THREADS>>>(a_, n_, seed, 1);
        fill_uniform<<<blocks_for(n_), THREADS>>>(b_, n_, seed, 2);
        add_reference<<<blocks_for(n_), THREADS>>>(a_, b_, expected_, n_);
        check(cudaMemset(c_, 0xFF, static_cast<size_t>(n_) * sizeof(__half)), "cudaMemset");
        check(cudaGetLastError(), "generating the input");
    }

    // Empty when c matches the expected output; otherwise what differs, in one line.
    std::string mismatches() {
        check(cudaMemset(tally_, 0, sizeof(Tally)), "cudaMemset");
        compare<<<blocks_for(n_), THREADS>>>(c_, expected_, n_, tally_);
        Tally tally;
        check(cudaMemcpy(&tally, tally_, sizeof(Tally), cudaMemcpyDeviceToHost), "checking");
        if (tally.count == 0) return "";
        char line[256];
        std::snprintf(line, sizeof line, "%llu of %lld elements differ (%.3g%%); max |diff| %g",
                      tally.count, static_cast<long long>(n_), 100.0 * tally.count / n_,
                      static_cast<double>(float_from_bits(tally.max_diff_bits)));
        std::string message = line;
        const int shown = static_cast<int>(std::min<unsigned long long>(tally.count, MAX_EXAMPLES));
        std::vector<Mismatch> examples(tally.examples, tally.examples + shown);
        std::sort(examples.begin(), examples.end(),
                  [](const Mismatch& x, const Mismatch& y) { return x.index < y.index; });
        for (const Mismatch& m : examples) {
            std::snprintf(line, sizeof line, "; at %lld: got %g, expected %g",
                          static_cast<long long>(m.index), m.got, m.expected);
            message += line;
        }
        std::snprintf(line, sizeof line, " (allowed |diff| <= %g + %g * |expected|)", ATOL, RTOL);
        return message + line;
    }

  private:
    int64_t n_;
    __half* a_ = nullptr;
    __half* b_ = nullptr;
    __half* c_ = nullptr;
    __half* expected_ = nullptr;
    Tally* tally_ = nullptr;
};

}  // namespace reference
