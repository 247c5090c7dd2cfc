// Host-only threading helpers (std::thread).  Not for device code.
#ifndef CUZK_PARALLEL_HPP
#define CUZK_PARALLEL_HPP

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace cuzk {

inline int resolve_threads(int threads) {
    if (threads <= 0) {
        unsigned hc = std::thread::hardware_concurrency();
        threads = hc == 0 ? 1 : (int)hc;
    }
    return std::min(threads, 256);
}

// Run fn(tid) on `threads` threads (the calling thread is thread 0).
// Exceptions in workers are captured and rethrown on the caller.
template <class Fn>
void run_threads(int threads, Fn&& fn) {
    if (threads <= 1) {
        fn(0);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs((size_t)threads);
    pool.reserve((size_t)threads - 1);
    for (int t = 1; t < threads; ++t) {
        pool.emplace_back([&, t]() {
            try {
                fn(t);
            } catch (...) {
                errs[(size_t)t] = std::current_exception();
            }
        });
    }
    try {
        fn(0);
    } catch (...) {
        errs[0] = std::current_exception();
    }
    for (auto& th : pool) th.join();
    for (auto& e : errs)
        if (e) std::rethrow_exception(e);
}

// Split [0, n) into `threads` contiguous ranges; fn(begin, end).
template <class Fn>
void parallel_for(uint64_t n, int threads, Fn&& fn) {
    if (n == 0) return;
    uint64_t t = (uint64_t)std::max(1, threads);
    if (t > n) t = n;
    if (t == 1) {
        fn((uint64_t)0, n);
        return;
    }
    run_threads((int)t, [&](int tid) {
        uint64_t b = n * (uint64_t)tid / t;
        uint64_t e = n * (uint64_t)(tid + 1) / t;
        if (b < e) fn(b, e);
    });
}

}  // namespace cuzk

#endif  // CUZK_PARALLEL_HPP
