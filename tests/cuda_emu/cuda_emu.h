// TEST ONLY: run the CUDA kernel files (cuzk_tasks/native/cuda/*.cu) on the CPU.
//
// Force-included (g++ -include) before a kernel file by tests/cupy_emu.py.  Every
// __global__ function becomes a plain C function; a launch runs the grid's blocks one
// after another and, inside a block, either every thread in turn (kernels without
// __syncthreads) or every thread as an OS thread meeting at a std::barrier (kernels
// with it).  __shared__ becomes a function-local static: one copy, used by the one
// block that runs at a time.  __CUDA_ARCH__ is defined, so the shared headers take their
// DEVICE code paths (cuzk/compat.cuh), not the x86 ones the native CPU core uses.
//
// What this cannot show: warp-level timing, memory coalescing, register pressure,
// NVRTC/driver behaviour -- only that the kernels compute the right thing.
#ifndef CUZK_CUDA_EMU_H
#define CUZK_CUDA_EMU_H

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace cuzk_emu {

struct dim3_t {
    unsigned x, y, z;
};

inline thread_local dim3_t tl_thread_idx, tl_block_idx, tl_block_dim, tl_grid_dim;
inline thread_local std::barrier<>* tl_barrier = nullptr;

inline void syncthreads() {
    if (tl_barrier == nullptr) {
        std::fprintf(stderr, "cuda_emu: __syncthreads() in a kernel launched without block threads\n");
        std::abort();
    }
    tl_barrier->arrive_and_wait();
}

// CUZK_EMU_REVERSE: blocks and (sequentially run) threads in reverse order.  A kernel whose
// result depends on the order its threads run in (a race on a GPU) then gives a different
// answer, and the differential tests catch it: they run in both orders.
#if defined(CUZK_EMU_REVERSE)
constexpr bool kReverse = true;
#else
constexpr bool kReverse = false;
#endif

inline unsigned ordered(unsigned i, unsigned n) { return kReverse ? n - 1 - i : i; }

template <class Body>
void launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
            bool block_threads, Body body) {
    const dim3_t grid{gx, gy, gz}, block{bx, by, bz};
    const unsigned nthreads = bx * by * bz;
    const unsigned long long nblocks = (unsigned long long)gx * gy * gz;
    for (unsigned long long b = 0; b < nblocks; ++b) {
                const unsigned long long bb = kReverse ? nblocks - 1 - b : b;
                const dim3_t blk{(unsigned)(bb % gx), (unsigned)((bb / gx) % gy),
                                 (unsigned)(bb / ((unsigned long long)gx * gy))};
                if (!block_threads) {
                    tl_grid_dim = grid, tl_block_dim = block, tl_block_idx = blk;
                    tl_barrier = nullptr;
                    for (unsigned i = 0; i < nthreads; ++i) {
                        const unsigned t = ordered(i, nthreads);
                        tl_thread_idx = dim3_t{t % bx, (t / bx) % by, t / (bx * by)};
                        body();
                    }
                    continue;
                }
                std::barrier<> bar(nthreads);
                std::vector<std::thread> threads;
                threads.reserve(nthreads);
                for (unsigned t = 0; t < nthreads; ++t)
                    threads.emplace_back([&, t] {
                        tl_grid_dim = grid, tl_block_dim = block, tl_block_idx = blk;
                        tl_thread_idx = dim3_t{t % bx, (t / bx) % by, t / (bx * by)};
                        tl_barrier = &bar;
                        body();
                    });
                for (auto& th : threads) th.join();
    }
}

}  // namespace cuzk_emu

#define threadIdx (cuzk_emu::tl_thread_idx)
#define blockIdx (cuzk_emu::tl_block_idx)
#define blockDim (cuzk_emu::tl_block_dim)
#define gridDim (cuzk_emu::tl_grid_dim)
#define __syncthreads() cuzk_emu::syncthreads()
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static
#define __CUDA_ARCH__ 900

inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i, x >>= 1) r = (r << 1) | (x & 1);
    return r;
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

#endif  // CUZK_CUDA_EMU_H
