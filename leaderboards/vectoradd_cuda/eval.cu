// vectoradd_cuda's driver, built together with the submission into one binary:
//
//     kernelcup_eval <test|benchmark|leaderboard> <cases-file>
//
// It speaks kernelcup's CUDA protocol v1 (harness/NOTES.md), a superset of GPU MODE's: one
// case per line of the cases file (`size: 1024; seed: 42`), `key: value` lines on the file
// descriptor named by POPCORN_FD, exit 0 when every check passed and 112 when one failed.
//
// test         check every case once
// benchmark    per case: check the first call, then time calls until the median settles
// leaderboard  the same, but every timed call's output is checked too (ranked runs)
//
// Every timed call gets fresh inputs, a cold L2 and a GPU that is already busy when the start
// event is recorded, so the event pair measures the submission's kernels and nothing else.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "reference.cuh"
#include "task.h"

namespace {

constexpr int EXIT_FAILED_CHECK = 112;
constexpr int MIN_RUNS = 10;
constexpr int MAX_RUNS = 10000;
constexpr double MAX_TIMED_SECONDS = 2.5;  // per case, wall clock
constexpr double BENCHMARK_SETTLED = 0.02;  // 95% interval of the median within 2% of it
constexpr double LEADERBOARD_SETTLED = 0.005;
constexpr uint64_t SPIN_NS = 20000;  // longer than the host needs to launch custom_kernel

using reference::check;
using reference::CudaError;

class Report {
  public:
    explicit Report(FILE* file) : file_(file) {}

    void log(const std::string& key, const std::string& value) {
        std::string line = value;
        std::replace(line.begin(), line.end(), '\n', ' ');
        std::fprintf(file_, "%s: %s\n", key.c_str(), line.c_str());
        std::fflush(file_);
    }
    void log(const std::string& key, double value) {
        char text[64];
        std::snprintf(text, sizeof text, "%.17g", value);
        log(key, std::string(text));
    }
    void log(const std::string& key, size_t value) { log(key, std::to_string(value)); }

  private:
    FILE* file_;
};

std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

struct Case {
    std::string spec;
    std::map<std::string, std::string> args;

    int64_t get(const std::string& key) const {
        const auto found = args.find(key);
        if (found == args.end()) throw std::runtime_error("case '" + spec + "' has no " + key);
        return std::stoll(found->second);
    }
};

std::vector<Case> read_cases(const char* path) {
    std::ifstream file(path);
    if (!file) throw std::runtime_error(std::string("cannot open ") + path);
    std::vector<Case> cases;
    std::string line;
    while (std::getline(file, line)) {
        line = trim(line);
        if (line.empty()) continue;
        Case parsed{line, {}};
        size_t start = 0;
        while (start <= line.size()) {
            size_t end = line.find(';', start);
            if (end == std::string::npos) end = line.size();
            const std::string part = trim(line.substr(start, end - start));
            start = end + 1;
            if (part.empty()) continue;
            const size_t colon = part.find(':');
            if (colon == std::string::npos) throw std::runtime_error("bad case line: " + line);
            parsed.args[trim(part.substr(0, colon))] = trim(part.substr(colon + 1));
        }
        cases.push_back(parsed);
    }
    return cases;
}

// Reads twice the L2 size so the inputs of the next call come from device memory. Reads
// leave clean lines: no write-back of ours lands inside the timed region.
__global__ void read_all(const int4* data, int64_t n, int* sink) {
    int acc = 0;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int4 v = __ldcg(data + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;  // the buffer is zero: never true, keeps the loads
}

// Keeps the GPU busy while the host launches custom_kernel after the start event.
__global__ void spin(uint64_t ns) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

class Timer {
  public:
    Timer() {
        int device = 0, l2 = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
        flush_n_ = std::max<int64_t>(2 * static_cast<int64_t>(l2), 1 << 20) / sizeof(int4);
        check(cudaMalloc(&flush_, flush_n_ * sizeof(int4)), "cudaMalloc");
        check(cudaMemset(flush_, 0, flush_n_ * sizeof(int4)), "cudaMemset");
        check(cudaMalloc(&sink_, sizeof(int)), "cudaMalloc");
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&end_), "cudaEventCreate");
    }
    ~Timer() {
        cudaFree(flush_);
        cudaFree(sink_);
        cudaEventDestroy(start_);
        cudaEventDestroy(end_);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // One timed call of custom_kernel, in nanoseconds.
    double time(reference::Problem& problem) {
        read_all<<<reference::blocks_for(flush_n_), reference::THREADS>>>(flush_, flush_n_, sink_);
        check(cudaDeviceSynchronize(), "flushing L2");
        spin<<<1, 1>>>(SPIN_NS);
        check(cudaEventRecord(start_), "cudaEventRecord");
        custom_kernel(problem.a(), problem.b(), problem.c(), problem.n());
        const cudaError_t recorded = cudaEventRecord(end_);
        check(cudaGetLastError(), "launching custom_kernel");
        check(recorded, "cudaEventRecord after custom_kernel");
        check(cudaDeviceSynchronize(), "running custom_kernel");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, end_), "cudaEventElapsedTime");
        return ms * 1e6;
    }

  private:
    int4* flush_ = nullptr;
    int64_t flush_n_ = 0;
    int* sink_ = nullptr;
    cudaEvent_t start_, end_;
};

struct Stats {
    double mean, std, err, best, worst, median;
};

Stats summarize(std::vector<double> durations) {
    std::sort(durations.begin(), durations.end());
    const double n = static_cast<double>(durations.size());
    const double mean = std::accumulate(durations.begin(), durations.end(), 0.0) / n;
    double squares = 0;
    for (double d : durations) squares += (d - mean) * (d - mean);
    const double std = durations.size() > 1 ? std::sqrt(squares / (n - 1)) : 0.0;
    const size_t mid = durations.size() / 2;
    const double median = durations.size() % 2 ? durations[mid]
                                               : 0.5 * (durations[mid - 1] + durations[mid]);
    return {mean, std, std / std::sqrt(n), durations.front(), durations.back(), median};
}

// Whether the 95% confidence interval of the median (by order statistics) lies within
// `tolerance` of the median.
bool median_settled(std::vector<double> durations, double tolerance) {
    std::sort(durations.begin(), durations.end());
    const double n = static_cast<double>(durations.size());
    const double half_width = 1.96 * std::sqrt(n) / 2;
    const auto lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - half_width)));
    const auto hi = static_cast<size_t>(std::min(n - 1, std::ceil(n / 2 + half_width)));
    const double median = durations[durations.size() / 2];
    return median - durations[lo] <= tolerance * median &&
           durations[hi] - median <= tolerance * median;
}

uint64_t call_seed(uint64_t seed, int call) {
    return call == 0 ? seed : reference::splitmix64(seed ^ reference::splitmix64(call));
}

int run_tests(Report& report, const std::vector<Case>& cases) {
    report.log("test-count", cases.size());
    bool passed = true;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::string prefix = "test." + std::to_string(i);
        report.log(prefix + ".spec", cases[i].spec);
        std::string error;
        bool broken = false;
        try {
            reference::Problem problem(cases[i].get("size"));
            problem.generate(cases[i].get("seed"));
            check(cudaDeviceSynchronize(), "generating the input");
            custom_kernel(problem.a(), problem.b(), problem.c(), problem.n());
            check(cudaGetLastError(), "launching custom_kernel");
            check(cudaDeviceSynchronize(), "running custom_kernel");
            error = problem.mismatches();
        } catch (const std::exception& e) {
            error = e.what();
            broken = true;
        }
        if (error.empty()) {
            report.log(prefix + ".status", "pass");
            continue;
        }
        passed = false;
        report.log(prefix + ".status", "fail");
        report.log(prefix + ".error", error);
        if (broken) break;  // a CUDA error is sticky: no later case can run
    }
    report.log("check", passed ? "pass" : "fail");
    return passed ? 0 : EXIT_FAILED_CHECK;
}

// Times one case; returns the failure message, empty when every checked call was right.
std::string time_case(const Case& c, Timer& timer, bool check_every_call, double settled,
                      std::vector<double>& durations) {
    reference::Problem problem(c.get("size"));
    const uint64_t seed = static_cast<uint64_t>(c.get("seed"));
    const auto started = std::chrono::steady_clock::now();
    for (int call = 0; call < MAX_RUNS; ++call) {
        problem.generate(call_seed(seed, call));
        durations.push_back(timer.time(problem));
        if (call == 0 || check_every_call) {
            const std::string error = problem.mismatches();
            if (!error.empty()) {
                return call == 0 ? error : "timed call " + std::to_string(call + 1) + ": " + error;
            }
        }
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
        if (call + 1 >= MIN_RUNS &&
            (elapsed.count() > MAX_TIMED_SECONDS || median_settled(durations, settled))) {
            break;
        }
    }
    return "";
}

int run_benchmarks(Report& report, const std::vector<Case>& cases, bool check_every_call,
                   double settled) {
    Timer timer;
    report.log("benchmark-count", cases.size());
    bool passed = true;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::string prefix = "benchmark." + std::to_string(i);
        report.log(prefix + ".spec", cases[i].spec);
        std::vector<double> durations;
        std::string error;
        bool broken = false;
        try {
            error = time_case(cases[i], timer, check_every_call, settled, durations);
        } catch (const std::exception& e) {
            error = e.what();
            broken = true;
        }
        if (!error.empty()) {
            passed = false;
            report.log(prefix + ".status", "fail");
            report.log(prefix + ".error", error);
            if (broken) break;
            continue;
        }
        const Stats stats = summarize(durations);
        std::string joined;
        for (double d : durations) {
            if (!joined.empty()) joined += ",";
            joined += std::to_string(static_cast<long long>(std::llround(d)));
        }
        report.log(prefix + ".runs", durations.size());
        report.log(prefix + ".mean", stats.mean);
        report.log(prefix + ".std", stats.std);
        report.log(prefix + ".err", stats.err);
        report.log(prefix + ".best", stats.best);
        report.log(prefix + ".worst", stats.worst);
        report.log(prefix + ".median", stats.median);
        report.log(prefix + ".durations", joined);
        report.log(prefix + ".status", "pass");
    }
    report.log("check", passed ? "pass" : "fail");
    return passed ? 0 : EXIT_FAILED_CHECK;
}

}  // namespace

int main(int argc, char** argv) {
    const char* fd_text = std::getenv("POPCORN_FD");
    if (fd_text == nullptr) {
        std::fprintf(stderr, "POPCORN_FD is not set: run me through the kernelcup harness\n");
        return 111;
    }
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s <test|benchmark|leaderboard> <cases-file>\n", argv[0]);
        return 2;
    }
    FILE* file = fdopen(std::atoi(fd_text), "w");
    if (file == nullptr) {
        std::fprintf(stderr, "cannot open POPCORN_FD %s\n", fd_text);
        return 111;
    }
    Report report(file);
    const std::string mode = argv[1];
    try {
        const std::vector<Case> cases = read_cases(argv[2]);
        if (mode == "test") return run_tests(report, cases);
        if (mode == "benchmark") return run_benchmarks(report, cases, false, BENCHMARK_SETTLED);
        if (mode == "leaderboard") {
            return run_benchmarks(report, cases, true, LEADERBOARD_SETTLED);
        }
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "driver error: %s\n", e.what());
        return 1;
    }
}
