// Host-only radix-2 NTT over Fr (Montgomery form), natural order in and out.
//
// Roots follow snarkjs/ffjavascript: the size-2^k transform uses ROOTS[k]
// from bn254_constants.cuh.  Forward: out[i] = sum_j in[j] * w^(i*j).
// Inverse: uses w^-1 and scales by 2^-k.
#ifndef CUZK_NTT_CPU_HPP
#define CUZK_NTT_CPU_HPP

#include <cstdint>
#include <utility>
#include <vector>

#include "bn254.cuh"
#include "parallel.hpp"

namespace cuzk {

struct FrTables {
    uint64_t roots[CUZK_FR_MAX_LOG2 + 1][4];
    uint64_t roots_inv[CUZK_FR_MAX_LOG2 + 1][4];
    uint64_t inv_2k[CUZK_FR_MAX_LOG2 + 1][4];
};

inline const FrTables& fr_tables() {
    static const FrTables t = {CUZK_FR_ROOTS_MONT, CUZK_FR_ROOTS_INV_MONT, CUZK_FR_INV_2K_MONT};
    return t;
}

inline Fr fr_root(uint32_t k) { return Fr::from_raw(fr_tables().roots[k]); }
inline Fr fr_root_inv(uint32_t k) { return Fr::from_raw(fr_tables().roots_inv[k]); }
inline Fr fr_inv_2k(uint32_t k) { return Fr::from_raw(fr_tables().inv_2k[k]); }

inline Fr fr_pow_u64(const Fr& a, uint64_t e) {
    uint64_t ee[4] = {e, 0, 0, 0};
    return Fr::pow(a, ee);
}

// out[i] = start * step^i for i in [0, n), computed in parallel.
inline void fr_geometric(Fr* out, uint64_t n, const Fr& start, const Fr& step, int threads) {
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        Fr cur = Fr::mul(start, fr_pow_u64(step, b));
        for (uint64_t i = b; i < e; ++i) {
            out[i] = cur;
            cur = Fr::mul(cur, step);
        }
    });
}

inline uint64_t bit_reverse(uint64_t x, uint32_t bits) {
    uint64_t r = 0;
    for (uint32_t i = 0; i < bits; ++i) {
        r = (r << 1) | (x & 1);
        x >>= 1;
    }
    return r;
}

inline void bit_reverse_permute(Fr* a, uint32_t log_n, int threads) {
    const uint64_t n = (uint64_t)1 << log_n;
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) {
            uint64_t j = bit_reverse(i, log_n);
            if (i < j) std::swap(a[i], a[j]);
        }
    });
}

// In-place DIT NTT with root `omega` (primitive 2^log_n-th root), no scaling.
inline void ntt_core(Fr* a, uint32_t log_n, const Fr& omega, int threads) {
    if (log_n == 0) return;
    const uint64_t n = (uint64_t)1 << log_n;
    threads = resolve_threads(threads);
    if (n < 4096) threads = 1;
    bit_reverse_permute(a, log_n, threads);
    std::vector<Fr> tw((size_t)(n / 2));
    fr_geometric(tw.data(), n / 2, Fr::one(), omega, threads);

    // number of threads as a power of two
    uint32_t log_t = 0;
    while (((uint64_t)2 << log_t) <= (uint64_t)threads && log_t + 1 < log_n) ++log_t;
    const uint64_t T = (uint64_t)1 << log_t;
    const uint32_t local_stages = log_n - log_t;  // stages with len <= n / T

    // Phase 1: independent sub-transforms of size n/T.
    run_threads((int)T, [&](int tid) {
        const uint64_t base = (uint64_t)tid * (n / T);
        Fr* x = a + base;
        const uint64_t m = n / T;
        for (uint32_t s = 1; s <= local_stages; ++s) {
            const uint64_t len = (uint64_t)1 << s, half = len >> 1;
            const uint64_t stride = n / len;
            for (uint64_t st = 0; st < m; st += len) {
                for (uint64_t j = 0; j < half; ++j) {
                    Fr u = x[st + j];
                    Fr v = Fr::mul(x[st + j + half], tw[(size_t)(j * stride)]);
                    x[st + j] = Fr::add(u, v);
                    x[st + j + half] = Fr::sub(u, v);
                }
            }
        }
    });
    // Phase 2: remaining stages, butterflies split across threads.
    for (uint32_t s = local_stages + 1; s <= log_n; ++s) {
        const uint64_t len = (uint64_t)1 << s, half = len >> 1;
        const uint64_t stride = n / len;
        parallel_for(n / 2, (int)T, [&](uint64_t b, uint64_t e) {
            for (uint64_t t = b; t < e; ++t) {
                uint64_t blk = t >> (s - 1), j = t & (half - 1);
                uint64_t i0 = blk * len + j;
                Fr u = a[i0];
                Fr v = Fr::mul(a[i0 + half], tw[(size_t)(j * stride)]);
                a[i0] = Fr::add(u, v);
                a[i0 + half] = Fr::sub(u, v);
            }
        });
    }
}

inline void ntt_forward(Fr* a, uint32_t log_n, int threads) {
    ntt_core(a, log_n, fr_root(log_n), threads);
}

// Inverse NTT without the 1/n scaling.
inline void ntt_inverse_noscale(Fr* a, uint32_t log_n, int threads) {
    ntt_core(a, log_n, fr_root_inv(log_n), threads);
}

inline void fr_scale(Fr* a, uint64_t n, const Fr& s, int threads) {
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) a[i] = Fr::mul(a[i], s);
    });
}

inline void ntt_inverse(Fr* a, uint32_t log_n, int threads) {
    ntt_inverse_noscale(a, log_n, threads);
    fr_scale(a, (uint64_t)1 << log_n, fr_inv_2k(log_n), resolve_threads(threads));
}

}  // namespace cuzk

#endif  // CUZK_NTT_CPU_HPP
