// Host-only QAP step of the Groth16 prover (snarkjs-compatible):
//   evaluate_ab: A*w and B*w on the evaluation domain from zkey section 4
//   compute_h:   H evaluations on the odd coset, exactly as snarkjs does.
// Deliberately separate from the MSM code.  C is a curve bundle (curve.cuh).
#ifndef CUZK_QAP_CPU_HPP
#define CUZK_QAP_CPU_HPP

#include <cstdint>
#include <cstring>
#include <vector>

#include "curve.cuh"
#include "ntt_cpu.hpp"
#include "parallel.hpp"

namespace cuzk {

enum QapStatus { QAP_OK = 0, QAP_BAD_RECORD = 1, QAP_NONCANONICAL = 2 };

// Bytes of one zkey section-4 record of a scalar field F (44 for both curves).
template <class F>
constexpr uint64_t coef_record_size() { return 12 + 8 * F::N; }

// coef records: u32 matrix (0 = A, 1 = B), u32 constraint, u32 signal,
// n8r-byte value (coef * R^2 mod r, little-endian).  witness: standard form.
// a_out / b_out: domain_size elements, Montgomery form.
template <class C>
inline int evaluate_ab(const uint8_t* rec, uint64_t n_coefs, const uint64_t* witness,
                       uint64_t n_vars, uint64_t domain_size, typename C::Fr* a_out,
                       typename C::Fr* b_out, int threads) {
    typedef typename C::Fr Fr;
    const uint64_t kCoefRecordSize = coef_record_size<Fr>();
    threads = resolve_threads(threads);
    // validate first (single pass, cheap)
    for (uint64_t i = 0; i < n_vars; ++i)
        if (!Fr::is_canonical(witness + Fr::N * i)) return QAP_NONCANONICAL;
    for (uint64_t k = 0; k < n_coefs; ++k) {
        const uint8_t* r = rec + k * kCoefRecordSize;
        uint32_t m, c, s;
        std::memcpy(&m, r, 4);
        std::memcpy(&c, r + 4, 4);
        std::memcpy(&s, r + 8, 4);
        uint64_t v[Fr::N];
        std::memcpy(v, r + 12, sizeof(v));
        if (m > 1 || c >= domain_size || s >= n_vars) return QAP_BAD_RECORD;
        if (!Fr::is_canonical(v)) return QAP_NONCANONICAL;
    }
    std::memset((void*)a_out, 0, sizeof(Fr) * domain_size);
    std::memset((void*)b_out, 0, sizeof(Fr) * domain_size);
    // Each thread owns a contiguous constraint range (deterministic, no locks)
    // and scans all records, skipping foreign ones; the scan is cheap next to
    // the multiplication, but only up to a few threads.
    int t = (int)std::min<uint64_t>((uint64_t)std::min(threads, 4),
                                    std::max<uint64_t>(1, n_coefs / 4096));
    run_threads(t, [&](int tid) {
        const uint64_t lo = domain_size * (uint64_t)tid / (uint64_t)t;
        const uint64_t hi = domain_size * (uint64_t)(tid + 1) / (uint64_t)t;
        for (uint64_t k = 0; k < n_coefs; ++k) {
            const uint8_t* r = rec + k * kCoefRecordSize;
            uint32_t m, c, s;
            std::memcpy(&c, r + 4, 4);
            if (c < lo || c >= hi) continue;
            std::memcpy(&m, r, 4);
            std::memcpy(&s, r + 8, 4);
            Fr v;
            std::memcpy(v.v, r + 12, sizeof(v.v));
            Fr w = Fr::from_raw(witness + Fr::N * (uint64_t)s);
            Fr p = Fr::mul(v, w);  // (coef R^2)(w) R^-1 = coef*w*R
            Fr* out = m == 0 ? a_out : b_out;
            out[c] = Fr::add(out[c], p);
        }
    });
    return QAP_OK;
}

// a, b: evaluations (Montgomery) on the 2^log_n domain; destroyed.
// h_out: 2^log_n values, STANDARD form: h_i = A'(i) B'(i) - C'(i) where X'
// are the evaluations on the coset g*<w>, g = ROOTS[log_n + 1].
template <class C>
inline void compute_h(typename C::Fr* a, typename C::Fr* b, uint32_t log_n, int threads,
                      uint64_t* h_out) {
    typedef typename C::Fr Fr;
    threads = resolve_threads(threads);
    const uint64_t n = (uint64_t)1 << log_n;
    std::vector<Fr> c((size_t)n);
    parallel_for(n, threads, [&](uint64_t lo, uint64_t hi) {
        for (uint64_t i = lo; i < hi; ++i) c[i] = Fr::mul(a[i], b[i]);
    });
    // coset twiddles with the 1/n of the inverse transform folded in, in bit-reversed
    // order: each inverse transform (DIF) leaves its output bit-reversed, the coset shift
    // applies there, and the forward transform (DIT) takes it so, back to natural order --
    // no permutation, and each size's twiddles computed once for the three
    std::vector<Fr> shift((size_t)n);
    fr_geometric(shift.data(), n, fr_inv_2k<C>(log_n), fr_root<C>(log_n + 1), threads);
    bit_reverse_permute(shift.data(), log_n, ntt_threads(log_n, threads));
    const std::vector<Fr> tw_inv = ntt_twiddles(log_n, fr_root_inv<C>(log_n), threads);
    const std::vector<Fr> tw_fwd = ntt_twiddles(log_n, fr_root<C>(log_n), threads);
    Fr* bufs[3] = {a, b, c.data()};
    for (int k = 0; k < 3; ++k) {
        Fr* x = bufs[k];
        ntt_dif_to_bitrev(x, log_n, tw_inv.data(), threads);
        parallel_for(n, threads, [&](uint64_t lo, uint64_t hi) {
            for (uint64_t i = lo; i < hi; ++i) x[i] = Fr::mul(x[i], shift[i]);
        });
        ntt_dit_from_bitrev(x, log_n, tw_fwd.data(), threads);
    }
    parallel_for(n, threads, [&](uint64_t lo, uint64_t hi) {
        for (uint64_t i = lo; i < hi; ++i) {
            Fr h = Fr::sub(Fr::mul(a[i], b[i]), c[i]);
            h.to_standard(h_out + Fr::N * i);
        }
    });
}

}  // namespace cuzk

#endif  // CUZK_QAP_CPU_HPP
