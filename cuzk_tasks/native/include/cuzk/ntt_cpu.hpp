// Host-only radix-2 NTT over a curve's Fr (Montgomery form).  C is a curve bundle
// (BN254, BLS12_381; see curve.cuh).  ntt_forward / ntt_inverse: natural order in and
// out.  The stages alone, for a caller that chains transforms without permuting
// (compute_h): ntt_dif_to_bitrev (natural in, bit-reversed out) and ntt_dit_from_bitrev
// (bit-reversed in, natural out), on twiddles computed once (ntt_twiddles).
//
// Roots follow snarkjs/ffjavascript: the size-2^k transform uses ROOTS[k]
// from the curve's generated constants.  Forward: out[i] = sum_j in[j] * w^(i*j).
// Inverse: uses w^-1 and scales by 2^-k.
#ifndef CUZK_NTT_CPU_HPP
#define CUZK_NTT_CPU_HPP

#include <cstdint>
#include <utility>
#include <vector>

#include "curve.cuh"
#include "parallel.hpp"

namespace cuzk {

// Roots of unity of C::Fr, k = 0..C::FR_MAX_LOG2 (Montgomery).
template <class C>
struct FrTables {
    static constexpr int L = C::Fr::N;
    uint64_t roots[C::FR_MAX_LOG2 + 1][L];
    uint64_t roots_inv[C::FR_MAX_LOG2 + 1][L];
    uint64_t inv_2k[C::FR_MAX_LOG2 + 1][L];
};

template <class C>
const FrTables<C>& fr_tables();

// The generated tables of curve C, whose macros have prefix PFX.
#define CUZK_FR_TABLES(C, PFX)                                                           \
    template <>                                                                          \
    inline const FrTables<C>& fr_tables<C>() {                                           \
        static const FrTables<C> t = {PFX##_FR_ROOTS_MONT, PFX##_FR_ROOTS_INV_MONT,      \
                                      PFX##_FR_INV_2K_MONT};                             \
        return t;                                                                        \
    }
CUZK_FR_TABLES(BN254, CUZK)
CUZK_FR_TABLES(BLS12_381, CUZK_BLS12_381)
#undef CUZK_FR_TABLES

template <class C>
inline typename C::Fr fr_root(uint32_t k) { return C::Fr::from_raw(fr_tables<C>().roots[k]); }
template <class C>
inline typename C::Fr fr_root_inv(uint32_t k) { return C::Fr::from_raw(fr_tables<C>().roots_inv[k]); }
template <class C>
inline typename C::Fr fr_inv_2k(uint32_t k) { return C::Fr::from_raw(fr_tables<C>().inv_2k[k]); }

template <class F>
inline F fr_pow_u64(const F& a, uint64_t e) {
    uint64_t ee[1] = {e};
    return F::pow(a, ee, 1);
}

// out[i] = start * step^i for i in [0, n), computed in parallel.
template <class F>
inline void fr_geometric(F* out, uint64_t n, const F& start, const F& step, int threads) {
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        F cur = F::mul(start, fr_pow_u64(step, b));
        for (uint64_t i = b; i < e; ++i) {
            out[i] = cur;
            cur = F::mul(cur, step);
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

template <class F>
inline void bit_reverse_permute(F* a, uint32_t log_n, int threads) {
    const uint64_t n = (uint64_t)1 << log_n;
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) {
            uint64_t j = bit_reverse(i, log_n);
            if (i < j) std::swap(a[i], a[j]);
        }
    });
}

// Threads an NTT of 2^log_n points uses: small transforms run on one.
inline int ntt_threads(uint32_t log_n, int threads) {
    threads = resolve_threads(threads);
    return log_n < 12 ? 1 : threads;
}

// Twiddles omega^0 .. omega^(n/2 - 1) of a 2^log_n transform with root `omega`: computed
// once for every transform of that size and root (compute_h runs three of each).
template <class F>
inline std::vector<F> ntt_twiddles(uint32_t log_n, const F& omega, int threads) {
    std::vector<F> tw(log_n == 0 ? 0 : (size_t)1 << (log_n - 1));
    fr_geometric(tw.data(), tw.size(), F::one(), omega, ntt_threads(log_n, threads));
    return tw;
}

// How a 2^log_n transform's stages split between threads: the first (DIT) or last (DIF)
// `local_stages` work inside blocks of m = n / T points, one block per thread; the other
// stages split their butterflies across the T threads.  T, a power of two, is at most the
// thread count.
struct NttSplit {
    uint64_t n, T, m;
    uint32_t local_stages;

    NttSplit(uint32_t log_n, int threads) : n((uint64_t)1 << log_n) {
        threads = ntt_threads(log_n, threads);
        uint32_t log_t = 0;
        while (((uint64_t)2 << log_t) <= (uint64_t)threads && log_t + 1 < log_n) ++log_t;
        T = (uint64_t)1 << log_t;
        m = n / T;
        local_stages = log_n - log_t;
    }
};

// One butterfly: Gentleman-Sande (`dif`: the twiddle after the difference) or Cooley-Tukey.
template <class F, bool dif>
inline void ntt_butterfly(F& x, F& y, const F& w) {
    const F u = x;
    if constexpr (dif) {
        x = F::add(u, y);
        y = F::mul(F::sub(u, y), w);
    } else {
        const F v = F::mul(y, w);
        x = F::add(u, v);
        y = F::sub(u, v);
    }
}

// One radix-2 stage over x[0, m) in blocks of `len` points (twiddle stride n / len).
template <class F, bool dif>
inline void ntt_stage_local(F* x, uint64_t m, uint64_t len, uint64_t stride, const F* tw) {
    const uint64_t half = len >> 1;
    for (uint64_t st = 0; st < m; st += len)
        for (uint64_t j = 0; j < half; ++j)
            ntt_butterfly<F, dif>(x[st + j], x[st + j + half], tw[(size_t)(j * stride)]);
}

// Stage s over all n points, its butterflies split across T threads.
template <class F, bool dif>
inline void ntt_stage_shared(F* a, uint64_t n, uint32_t s, const F* tw, int T) {
    const uint64_t len = (uint64_t)1 << s, half = len >> 1, stride = n / len;
    parallel_for(n / 2, T, [&](uint64_t b, uint64_t e) {
        for (uint64_t t = b; t < e; ++t) {
            const uint64_t j = t & (half - 1), i0 = (t >> (s - 1)) * len + j;
            ntt_butterfly<F, dif>(a[i0], a[i0 + half], tw[(size_t)(j * stride)]);
        }
    });
}

// The local stages inside each thread's block: 1 up (DIT) or down to 1 (DIF).
template <class F, bool dif>
inline void ntt_local_stages(F* a, const NttSplit& sp, const F* tw) {
    run_threads((int)sp.T, [&](int tid) {
        for (uint32_t k = 1; k <= sp.local_stages; ++k) {
            const uint32_t s = dif ? sp.local_stages + 1 - k : k;
            ntt_stage_local<F, dif>(a + (uint64_t)tid * sp.m, sp.m, (uint64_t)1 << s, sp.n >> s, tw);
        }
    });
}

// Decimation in time: bit-reversed input -> natural output, no scaling.  `tw`: the
// transform's ntt_twiddles.
template <class F>
inline void ntt_dit_from_bitrev(F* a, uint32_t log_n, const F* tw, int threads) {
    if (log_n == 0) return;
    const NttSplit sp(log_n, threads);
    ntt_local_stages<F, false>(a, sp, tw);
    for (uint32_t s = sp.local_stages + 1; s <= log_n; ++s)
        ntt_stage_shared<F, false>(a, sp.n, s, tw, (int)sp.T);
}

// Decimation in frequency: natural input -> bit-reversed output, no scaling.  Followed by
// ntt_dit_from_bitrev, it needs no permutation at all (compute_h).
template <class F>
inline void ntt_dif_to_bitrev(F* a, uint32_t log_n, const F* tw, int threads) {
    if (log_n == 0) return;
    const NttSplit sp(log_n, threads);
    for (uint32_t s = log_n; s > sp.local_stages; --s)
        ntt_stage_shared<F, true>(a, sp.n, s, tw, (int)sp.T);
    ntt_local_stages<F, true>(a, sp, tw);
}

// In-place NTT with root `omega` (primitive 2^log_n-th root), natural order in and out,
// no scaling.
template <class F>
inline void ntt_core(F* a, uint32_t log_n, const F& omega, int threads) {
    if (log_n == 0) return;
    threads = ntt_threads(log_n, threads);
    bit_reverse_permute(a, log_n, threads);
    const std::vector<F> tw = ntt_twiddles(log_n, omega, threads);
    ntt_dit_from_bitrev(a, log_n, tw.data(), threads);
}

template <class C>
inline void ntt_forward(typename C::Fr* a, uint32_t log_n, int threads) {
    ntt_core(a, log_n, fr_root<C>(log_n), threads);
}

// Inverse NTT without the 1/n scaling.
template <class C>
inline void ntt_inverse_noscale(typename C::Fr* a, uint32_t log_n, int threads) {
    ntt_core(a, log_n, fr_root_inv<C>(log_n), threads);
}

template <class F>
inline void fr_scale(F* a, uint64_t n, const F& s, int threads) {
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) a[i] = F::mul(a[i], s);
    });
}

template <class C>
inline void ntt_inverse(typename C::Fr* a, uint32_t log_n, int threads) {
    ntt_inverse_noscale<C>(a, log_n, threads);
    fr_scale(a, (uint64_t)1 << log_n, fr_inv_2k<C>(log_n), resolve_threads(threads));
}

}  // namespace cuzk

#endif  // CUZK_NTT_CPU_HPP
