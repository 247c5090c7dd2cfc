// Host-only kernels of the single-party Groth16 setup (cuzk-tasks setup):
//   fixed_base_mul  k_i * P for one base point P and many scalars k_i (G1 or G2),
//                   affine Montgomery output exactly as a zkey stores points;
//   setup_scalars   the QAP polynomials of an r1cs evaluated at tau, turned into
//                   the scalars of every zkey section (A, B, IC, C, H) the way
//                   snarkjs's zkey_new lays them out, plus the section-4 records.
// C is a curve bundle (curve.cuh), G one of its groups (C::G1, C::G2).
#ifndef CUZK_SETUP_CPU_HPP
#define CUZK_SETUP_CPU_HPP

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "curve.cuh"
#include "ntt_cpu.hpp"
#include "parallel.hpp"
#include "qap_cpu.hpp"

namespace cuzk {

enum SetupStatus {
    SETUP_OK = 0,
    SETUP_BAD_R1CS = 1,      // the constraint section is truncated or names a wire >= n_vars
    SETUP_NONCANONICAL = 2,  // a coefficient or scalar is >= r
    SETUP_BAD_ARG = 3,       // domain too small / too large, tau on the domain, capacity short
};

// Overwrite a buffer that held values derived from the toxic waste before it is
// freed (volatile: the compiler may not drop stores to memory about to die).
template <class T>
inline void wipe(std::vector<T>& v) {
    volatile uint8_t* p = reinterpret_cast<volatile uint8_t*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(T); ++i) p[i] = 0;
    std::vector<T>().swap(v);
}

// In place: x[i] <- 1 / x[i] for the non-zero x[i] (zeros stay zero), by
// Montgomery's trick: one inversion and three multiplications per element.
template <class F>
inline void batch_inverse(F* x, uint64_t n, std::vector<F>& scratch) {
    scratch.resize((size_t)n);
    F acc = F::one();
    for (uint64_t i = 0; i < n; ++i) {
        scratch[i] = acc;  // product of the non-zero x[0..i)
        if (!x[i].is_zero()) acc = F::mul(acc, x[i]);
    }
    F inv = F::inv(acc);
    for (uint64_t i = n; i-- > 0;) {
        if (x[i].is_zero()) continue;
        F xi = x[i];
        x[i] = F::mul(inv, scratch[i]);
        inv = F::mul(inv, xi);
    }
}

// The same, split into one contiguous range per thread.
template <class F>
inline void batch_inverse_parallel(F* x, uint64_t n, int threads) {
    parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
        std::vector<F> scratch;
        batch_inverse(x + b, e - b, scratch);
    });
}

// XYZZ points -> affine (Montgomery, all-zero infinity) with one field inversion
// per batch: only ZZZ = z^3 is inverted, then 1/z = ZZ / ZZZ, x = X / ZZ = X (1/z)^2
// and y = Y / ZZZ.
template <class G>
inline void xyzz_batch_to_affine(const typename G::XYZZ* p, uint64_t n, typename G::Affine* out) {
    typedef typename G::Field F;
    std::vector<F> inv((size_t)n), scratch;
    for (uint64_t i = 0; i < n; ++i) inv[i] = p[i].is_inf() ? F::zero() : p[i].ZZZ;
    batch_inverse(inv.data(), n, scratch);
    for (uint64_t i = 0; i < n; ++i) {
        if (p[i].is_inf()) {
            out[i] = G::Affine::infinity();
            continue;
        }
        F zi = F::mul(inv[i], p[i].ZZ);
        out[i].x = F::mul(p[i].X, F::sqr(zi));
        out[i].y = F::mul(p[i].Y, inv[i]);
    }
}

// Window width of the fixed-base table for n scalars: each scalar costs one
// mixed addition per window (ceil(BITS / w)), the table costs 2^w points per
// window to build and keep; w grows with n so that the table stays a small
// share of the work (and at most 2^14 points per window: ~20 MB for BN254 G1).
inline int fixed_base_window(uint64_t n) {
    int lg = 0;
    while (lg < 63 && ((uint64_t)1 << (lg + 1)) <= n) ++lg;
    return std::max(4, std::min(14, lg - 4));
}

// out[i] = scalars[i] * base (affine, Montgomery; all zero for infinity).
// scalars: n x Scalar::N limbs, standard form, each < r (checked by the caller).
// Windowed fixed-base method: table[j][d - 1] = d * 2^(w j) * base, so a scalar
// is the sum of one table entry per non-zero w-bit digit, with no doublings.
template <class G>
inline void fixed_base_mul(const typename G::Affine& base, const uint64_t* scalars, uint64_t n,
                           int threads, typename G::Affine* out) {
    typedef typename G::Affine Affine;
    typedef typename G::XYZZ XYZZ;
    typedef typename G::Scalar S;
    threads = resolve_threads(threads);
    if (n == 0) return;
    if (base.is_inf()) {
        for (uint64_t i = 0; i < n; ++i) out[i] = Affine::infinity();
        return;
    }
    const int w = fixed_base_window(n);
    const int windows = (S::BITS + w - 1) / w;
    const uint64_t per = ((uint64_t)1 << w) - 1;  // entries per window (digit 0 is not stored)
    // 2^(w j) * base for every window, by doubling (serial: windows * w doublings).
    std::vector<XYZZ> starts((size_t)windows);
    {
        XYZZ cur = G::to_xyzz(base);
        for (int j = 0; j < windows; ++j) {
            starts[j] = cur;
            for (int k = 0; k < w; ++k) cur = G::xyzz_dbl(cur);
        }
    }
    std::vector<Affine> table((size_t)windows * per);
    // each window's row: its start normalised, then d * start by repeated mixed addition
    parallel_for((uint64_t)windows, threads, [&](uint64_t b, uint64_t e) {
        std::vector<XYZZ> row((size_t)per);
        for (uint64_t j = b; j < e; ++j) {
            Affine start;
            xyzz_batch_to_affine<G>(&starts[j], 1, &start);
            XYZZ acc = G::to_xyzz(start);
            row[0] = acc;
            for (uint64_t d = 1; d < per; ++d) {
                acc = G::xyzz_add_mixed(acc, start);
                row[d] = acc;
            }
            xyzz_batch_to_affine<G>(row.data(), per, &table[j * per]);
        }
    });
    // the scalars, in chunks so that each batch normalisation amortises its inversion
    const uint64_t kChunk = 1024;
    const uint64_t chunks = (n + kChunk - 1) / kChunk;
    parallel_for(chunks, threads, [&](uint64_t cb, uint64_t ce) {
        std::vector<XYZZ> acc((size_t)kChunk);
        for (uint64_t c = cb; c < ce; ++c) {
            const uint64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
            for (uint64_t i = lo; i < hi; ++i) {
                const uint64_t* k = scalars + (uint64_t)S::N * i;
                XYZZ a = XYZZ::infinity();
                for (int j = 0; j < windows; ++j) {
                    // digit j: bits [w j, w j + w) of k, possibly straddling two limbs
                    const int bit = w * j, limb = bit / 64, off = bit % 64;
                    uint64_t d = k[limb] >> off;
                    if (off + w > 64 && limb + 1 < S::N) d |= k[limb + 1] << (64 - off);
                    d &= per;
                    if (d) a = G::xyzz_add_mixed(a, table[(uint64_t)j * per + d - 1]);
                }
                acc[i - lo] = a;
            }
            xyzz_batch_to_affine<G>(acc.data(), hi - lo, out + lo);
        }
    });
}

// The r1cs constraint section (circom .r1cs section 2, coefficients n8 = 32
// bytes, standard form) walked term by term: fn(constraint, matrix 0/1/2 = A/B/C,
// wire, coefficient limbs).  Returns a SetupStatus.
template <class Fr, class Fn>
inline int for_each_r1cs_term(const uint8_t* cons, uint64_t len, uint64_t n_constraints,
                              uint64_t n_vars, Fn&& fn) {
    const uint64_t term = 4 + 8 * (uint64_t)Fr::N;
    uint64_t pos = 0;
    for (uint64_t c = 0; c < n_constraints; ++c) {
        for (int m = 0; m < 3; ++m) {
            if (pos + 4 > len) return SETUP_BAD_R1CS;
            uint32_t nt;
            std::memcpy(&nt, cons + pos, 4);
            pos += 4;
            if ((uint64_t)nt > (len - pos) / term) return SETUP_BAD_R1CS;
            for (uint32_t t = 0; t < nt; ++t, pos += term) {
                uint32_t wire;
                std::memcpy(&wire, cons + pos, 4);
                uint64_t v[Fr::N];
                std::memcpy(v, cons + pos + 4, sizeof(v));
                if (wire >= n_vars) return SETUP_BAD_R1CS;
                if (!Fr::is_canonical(v)) return SETUP_NONCANONICAL;
                fn(c, m, wire, v);
            }
        }
    }
    return pos == len ? SETUP_OK : SETUP_BAD_R1CS;
}

// out[i] = Z(x) / size * root^(shift + step i) / (x - root^(shift + step i)) for
// i < count: the Lagrange basis polynomial of the size-`size` domain <root> at
// the point root^(shift + step i), evaluated at x (Z(x) = x^size - 1).
template <class C>
inline bool lagrange_at(const typename C::Fr& x, uint32_t log_size, uint64_t shift, uint64_t step,
                        uint64_t count, const typename C::Fr& scale, int threads,
                        typename C::Fr* out) {
    typedef typename C::Fr Fr;
    const Fr root = fr_root<C>(log_size);
    const uint64_t size = (uint64_t)1 << log_size;
    Fr zx = Fr::sub(fr_pow_u64(x, size), Fr::one());
    if (zx.is_zero()) return false;  // x is on the domain: no Lagrange form there
    Fr factor = Fr::mul(Fr::mul(zx, fr_inv_2k<C>(log_size)), scale);
    fr_geometric(out, count, fr_pow_u64(root, shift), fr_pow_u64(root, step), threads);
    std::vector<Fr> num((size_t)count);
    parallel_for(count, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) {
            num[i] = Fr::mul(out[i], factor);
            out[i] = Fr::sub(x, out[i]);  // never zero: Z(x) != 0
        }
    });
    batch_inverse_parallel(out, count, threads);
    parallel_for(count, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) out[i] = Fr::mul(out[i], num[i]);
    });
    wipe(num);
    return true;
}


// Every scalar of a zkey from the r1cs and the toxic waste, as snarkjs's
// zkey_new lays a zkey out (its Lagrange-basis ptau sections replaced by the
// values at tau themselves):
//   A_s, B_s, C_s = sum over the terms of wire s of coef * L_c(tau), L_c the
//       Lagrange basis of the size-n domain at constraint c; snarkjs adds one
//       constraint per public signal s = 0..n_public after the r1cs ones,
//       n_constraints + s, with A = wire s (coefficient 1) so that the IC
//       points are linearly independent;
//   a_out[s] = A_s, b_out[s] = B_s (zkey sections 5, 6, 7);
//   k_out[s] = (beta A_s + alpha B_s + C_s) / gamma for s <= n_public (IC,
//       section 3) and / delta for the others (section 8);
//   h_out[i] = L'_{2i+1}(tau) / delta, L' the Lagrange basis of the size-2n
//       domain: the odd points of the coset the prover evaluates H on
//       (compute_h in qap_cpu.hpp), section 9;
//   coef_out: the section-4 records (A and B terms and the public constraints),
//       the coefficient stored as coef * R^2 mod r as snarkjs stores it.
// toxic: 5 x Fr::N limbs, standard form: tau, alpha, beta, 1/gamma, 1/delta.
// All outputs are standard form (MSM / fixed-base scalars).
template <class C>
inline int setup_scalars(const uint8_t* cons, uint64_t len, uint64_t n_constraints,
                         uint64_t n_vars, uint64_t n_public, uint32_t log_n,
                         const uint64_t* toxic, uint64_t* a_out, uint64_t* b_out,
                         uint64_t* k_out, uint64_t* h_out, uint8_t* coef_out,
                         uint64_t coef_cap, uint64_t* n_coefs, int threads) {
    typedef typename C::Fr Fr;
    const int L = Fr::N;
    threads = resolve_threads(threads);
    if (log_n + 1 > C::FR_MAX_LOG2) return SETUP_BAD_ARG;
    const uint64_t n = (uint64_t)1 << log_n;
    if (n_public + 1 > n_vars || n_constraints + n_public + 1 > n) return SETUP_BAD_ARG;
    for (int i = 0; i < 5; ++i)
        if (!Fr::is_canonical(toxic + L * i)) return SETUP_NONCANONICAL;
    const Fr tau = Fr::from_standard(toxic), alpha = Fr::from_standard(toxic + L),
             beta = Fr::from_standard(toxic + 2 * L), gamma_inv = Fr::from_standard(toxic + 3 * L),
             delta_inv = Fr::from_standard(toxic + 4 * L);

    const uint64_t used = n_constraints + n_public + 1;
    std::vector<Fr> lag((size_t)used);
    if (!lagrange_at<C>(tau, log_n, 0, 1, used, Fr::one(), threads, lag.data()))
        return SETUP_BAD_ARG;

    std::vector<Fr> acc[3];
    for (auto& v : acc) v.assign((size_t)n_vars, Fr::zero());
    const uint64_t rec_size = coef_record_size<Fr>();
    uint64_t records = 0;
    bool overflow = false;
    auto record = [&](uint32_t m, uint32_t c, uint32_t s, const Fr& coef_mont) {
        if (records >= coef_cap) {
            overflow = true;
            return;
        }
        uint8_t* r = coef_out + records * rec_size;
        std::memcpy(r, &m, 4);
        std::memcpy(r + 4, &c, 4);
        std::memcpy(r + 8, &s, 4);
        // Montgomery form applied twice: (coef R) R = coef R^2 mod r
        uint64_t v[Fr::N];
        Fr::from_standard(coef_mont.v).to_raw(v);
        std::memcpy(r + 12, v, sizeof(v));
        ++records;
    };
    // One pass, serial: the accumulation targets are scattered over the wires
    // (a handful of multiplications per term, far below the point work).
    int st = for_each_r1cs_term<Fr>(cons, len, n_constraints, n_vars,
                                    [&](uint64_t c, int m, uint32_t wire, const uint64_t* v) {
        Fr coef = Fr::from_standard(v);
        acc[m][wire] = Fr::add(acc[m][wire], Fr::mul(coef, lag[c]));
        if (m < 2) record((uint32_t)m, (uint32_t)c, wire, coef);
    });
    if (st != SETUP_OK) {
        for (auto& v : acc) wipe(v);
        wipe(lag);
        return st;
    }
    for (uint64_t s = 0; s <= n_public; ++s) {
        acc[0][s] = Fr::add(acc[0][s], lag[n_constraints + s]);
        record(0, (uint32_t)(n_constraints + s), (uint32_t)s, Fr::one());
    }
    if (overflow) return SETUP_BAD_ARG;
    *n_coefs = records;

    parallel_for(n_vars, threads, [&](uint64_t b, uint64_t e) {
        for (uint64_t s = b; s < e; ++s) {
            Fr k = Fr::add(Fr::add(Fr::mul(beta, acc[0][s]), Fr::mul(alpha, acc[1][s])), acc[2][s]);
            k = Fr::mul(k, s <= n_public ? gamma_inv : delta_inv);
            acc[0][s].to_standard(a_out + L * s);
            acc[1][s].to_standard(b_out + L * s);
            k.to_standard(k_out + L * s);
        }
    });
    for (auto& v : acc) wipe(v);
    wipe(lag);
    std::vector<Fr> h((size_t)n);
    bool ok = lagrange_at<C>(tau, log_n + 1, 1, 2, n, delta_inv, threads, h.data());
    if (ok) {
        parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
            for (uint64_t i = b; i < e; ++i) h[i].to_standard(h_out + L * i);
        });
    }
    wipe(h);
    return ok ? SETUP_OK : SETUP_BAD_ARG;
}

}  // namespace cuzk

#endif  // CUZK_SETUP_CPU_HPP
