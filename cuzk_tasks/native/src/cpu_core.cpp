// cuzk-tasks native CPU proving core: C ABI loaded with ctypes by
// cuzk_tasks/groth16/backends/native.py.
//
// Conventions (all functions; cuzk_prove_files takes its curve from the zkey):
//   * the first argument `curve` picks the curve: 0 = BN254 (snarkjs "bn128"),
//     1 = BLS12-381 ("bls12381"); anything else is CUZK_ERR_ARG;
//   * return int status: 0 = ok, otherwise one of the CUZK_ERR_* codes below;
//     nothing is thrown across the ABI and nothing is printed;
//   * field elements are little-endian 64-bit limbs: Fr 4 limbs (both curves),
//     Fq L = 4 (BN254) or 6 (BLS12-381) limbs, Fq2 2L limbs (c0, c1);
//   * curve points:
//       G1 affine   2L limbs  x y                      (Montgomery, all-zero = infinity)
//       G2 affine   4L limbs  x.c0 x.c1 y.c0 y.c1       (Montgomery, all-zero = infinity)
//       G1 Jacobian 3L limbs X Y Z, G2 Jacobian 6L limbs X Y Z (each Fq2 = c0,c1),
//       x = X/Z^2, y = Y/Z^3, Montgomery; Z = 0 means infinity.  The MSM
//       functions currently always return a normalised point (Z = 1 in
//       Montgomery form, or X = Y = Z = 0 for infinity), but callers must
//       accept any Z.
//   * threads <= 0 means std::thread::hardware_concurrency().
#include <Python.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "cuzk/curve.cuh"
#include "cuzk/msm_cpu.hpp"
#include "cuzk/ntt_cpu.hpp"
#include "cuzk/pairing.hpp"
#include "cuzk/prove_cpu.hpp"
#include "cuzk/qap_cpu.hpp"
#include "cuzk/setup_cpu.hpp"

// 3: cuzk_pairing / cuzk_pairing_check; cuzk_g1/g2_fixed_base_mul and cuzk_setup_scalars
// (cuzk-tasks setup).  4: cuzk_prove_files / cuzk_free (cuzk-tasks prove without numpy).
#define CUZK_ABI_VERSION 4

enum {
    CUZK_OK = 0,
    CUZK_ERR_NULL = 1,           // a required pointer was NULL
    CUZK_ERR_ARG = 2,            // bad argument value (curve, size, op code, log_n, ...)
    CUZK_ERR_NONCANONICAL = 3,   // an input value is >= the field modulus
    CUZK_ERR_RECORD = 4,         // a coefficient record is out of range
    CUZK_ERR_NOMEM = 5,          // allocation failed
    CUZK_ERR_INTERNAL = 6,       // unexpected C++ exception
    CUZK_ERR_NOT_ON_CURVE = 7,   // a point is not on the curve
    CUZK_ERR_IO = 8,             // a file could not be opened or mapped
    CUZK_ERR_FORMAT = 9,         // a file is not laid out as cuzk_prove_files expects
    CUZK_ERR_UNSATISFIED = 10,   // the proof failed self-verification
    CUZK_ERR_RANDOM = 11,        // the OS random number generator failed
};

using namespace cuzk;

namespace {

template <class Fn>
int guarded(Fn&& fn) {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return CUZK_ERR_NOMEM;
    } catch (...) {
        return CUZK_ERR_INTERNAL;
    }
}

// fn(C{}) for the curve bundle named by the ABI's curve id.
template <class Fn>
int with_curve(int curve, Fn&& fn) {
    switch (curve) {
        case 0: return fn(BN254());
        case 1: return fn(BLS12_381());
        default: return CUZK_ERR_ARG;
    }
}

template <class C>
typename C::Affine load_affine(const uint64_t* p) {
    typename C::Affine a;
    std::memcpy((void*)&a, p, sizeof(a));
    return a;
}

template <class C>
void store_affine(const typename C::Affine& a, uint64_t* out) {
    std::memcpy(out, (const void*)&a, sizeof(a));
}

// Write a Jacobian (normalised) from an affine point.
template <class C>
void store_jacobian_from_affine(const typename C::Affine& a, uint64_t* out) {
    typedef typename C::Field F;
    const int L = F::N;
    if (a.is_inf()) {
        std::memset(out, 0, sizeof(uint64_t) * 3 * L);
        return;
    }
    std::memcpy(out, (const void*)&a.x, sizeof(F));
    std::memcpy(out + L, (const void*)&a.y, sizeof(F));
    F one = F::one();
    std::memcpy(out + 2 * L, (const void*)&one, sizeof(F));
}

template <class C>
typename C::Jacobian load_jacobian(const uint64_t* p) {
    typename C::Jacobian j;
    std::memcpy((void*)&j, p, sizeof(j));
    return j;
}

template <class F>
bool canonical(const F& x) {
    return F::is_canonical(reinterpret_cast<const uint64_t*>(&x));
}

template <class C>
int msm_impl(const uint64_t* bases, const uint64_t* scalars, uint64_t n, int threads,
             uint64_t* out) {
    if (!out || (n > 0 && (!bases || !scalars))) return CUZK_ERR_NULL;
    return guarded([&]() -> int {
        typedef typename C::Affine Affine;
        static_assert(sizeof(Affine) == sizeof(uint64_t) * 2 * C::Field::N, "layout");
        const Affine* pts = reinterpret_cast<const Affine*>(bases);
        for (uint64_t i = 0; i < n; ++i)
            if (!C::is_canonical(pts[i])) return CUZK_ERR_NONCANONICAL;
        typename C::XYZZ r = PippengerMsm<C>::run(pts, scalars, n, threads);
        store_jacobian_from_affine<C>(C::xyzz_to_affine(r), out);
        return CUZK_OK;
    });
}

template <class F>
int field_op_impl(int op, const uint64_t* a, const uint64_t* b, uint64_t* out, uint64_t n) {
    const int L = F::N;
    for (uint64_t i = 0; i < n; ++i) {
        F x = F::from_raw(a + L * i);
        if (!F::is_canonical(a + L * i)) return CUZK_ERR_NONCANONICAL;
        F y = F::zero();
        if (op <= 2) {
            y = F::from_raw(b + L * i);
            if (!F::is_canonical(b + L * i)) return CUZK_ERR_NONCANONICAL;
        }
        F r;
        switch (op) {
            case 0: r = F::add(x, y); break;
            case 1: r = F::sub(x, y); break;
            case 2: r = F::mul(x, y); break;
            case 3: r = F::sqr(x); break;
            case 4: r = F::inv(x); break;
            case 5: r = F::neg(x); break;
            case 6: r = F::dbl(x); break;
            default: return CUZK_ERR_ARG;
        }
        r.to_raw(out + L * i);
    }
    return CUZK_OK;
}

template <class F>
int convert_impl(uint64_t* v, uint64_t n, bool to_mont) {
    if (n > 0 && !v) return CUZK_ERR_NULL;
    const int L = F::N;
    for (uint64_t i = 0; i < n; ++i)
        if (!F::is_canonical(v + L * i)) return CUZK_ERR_NONCANONICAL;
    parallel_for(n, n >= 65536 ? resolve_threads(0) : 1, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) {
            if (to_mont) F::from_standard(v + L * i).to_raw(v + L * i);
            else F::from_raw(v + L * i).to_standard(v + L * i);
        }
    });
    return CUZK_OK;
}

// field: 0 = Fr, 1 = Fq, 2 = Fq2 (= 2n Fq elements).
int convert(int curve, int field, uint64_t* v, uint64_t n, bool to_mont) {
    return with_curve(curve, [&](auto c) -> int {
        typedef decltype(c) C;
        return guarded([&]() -> int {
            if (field == 0) return convert_impl<typename C::Fr>(v, n, to_mont);
            if (field == 1) return convert_impl<typename C::Fq>(v, n, to_mont);
            if (field == 2) return convert_impl<typename C::Fq>(v, 2 * n, to_mont);
            return CUZK_ERR_ARG;
        });
    });
}

// op: 0 = p + q, 1 = 2p, 2 = -p, 3 = k*p (q = scalar, 4 limbs standard form)
template <class C>
int point_op_impl(int op, const uint64_t* p, const uint64_t* q, uint64_t* out) {
    if (!p || !out || ((op == 0 || op == 3) && !q)) return CUZK_ERR_NULL;
    return guarded([&]() -> int {
        typename C::Affine a = load_affine<C>(p);
        if (!C::is_canonical(a)) return CUZK_ERR_NONCANONICAL;
        typename C::Affine r;
        switch (op) {
            case 0: {
                typename C::Affine b = load_affine<C>(q);
                if (!C::is_canonical(b)) return CUZK_ERR_NONCANONICAL;
                r = C::to_affine(C::add(C::to_jacobian(a), C::to_jacobian(b)));
                break;
            }
            case 1: r = C::to_affine(C::dbl(C::to_jacobian(a))); break;
            case 2: r = C::neg(a); break;
            case 3: r = C::to_affine(C::mul(a, q)); break;
            default: return CUZK_ERR_ARG;
        }
        store_affine<C>(r, out);
        return CUZK_OK;
    });
}

template <class C>
int check_points_impl(const uint64_t* pts, uint64_t n, uint64_t* bad_index) {
    if (n > 0 && !pts) return CUZK_ERR_NULL;
    const int L = C::Field::N;
    for (uint64_t i = 0; i < n; ++i) {
        typename C::Affine a = load_affine<C>(pts + (uint64_t)2 * L * i);
        int st = CUZK_OK;
        if (!C::is_canonical(a)) st = CUZK_ERR_NONCANONICAL;
        else if (!C::is_on_curve(a)) st = CUZK_ERR_NOT_ON_CURVE;
        if (st != CUZK_OK) {
            if (bad_index) *bad_index = i;
            return st;
        }
    }
    return CUZK_OK;
}

// fn(C{}, r) with r = prod e(g1[i], g2[i]) (see cuzk_pairing below) on the curve
// named by `curve`, after checking the points.
template <class Fn>
int with_pairing(int curve, const uint64_t* g1, const uint64_t* g2, uint64_t n, Fn&& fn) {
    if (n > 0 && (!g1 || !g2)) return CUZK_ERR_NULL;
    return with_curve(curve, [&](auto c) -> int {
        typedef decltype(c) C;
        return guarded([&]() -> int {
            int st = check_points_impl<typename C::G1>(g1, n, nullptr);
            if (st == CUZK_OK) st = check_points_impl<typename C::G2>(g2, n, nullptr);
            if (st != CUZK_OK) return st;
            fn(c, Pairing<C>::pairing(reinterpret_cast<const typename C::G1::Affine*>(g1),
                                      reinterpret_cast<const typename C::G2::Affine*>(g2), n));
            return CUZK_OK;
        });
    });
}

template <class C>
int jacobian_to_affine_impl(const uint64_t* jac, uint64_t* out) {
    if (!jac || !out) return CUZK_ERR_NULL;
    typename C::Jacobian j = load_jacobian<C>(jac);
    if (!canonical(j.X) || !canonical(j.Y) || !canonical(j.Z)) return CUZK_ERR_NONCANONICAL;
    store_affine<C>(C::to_affine(j), out);
    return CUZK_OK;
}

template <class G>
int fixed_base_impl(const uint64_t* base, const uint64_t* scalars, uint64_t n, int threads,
                    uint64_t* out) {
    if (!base || (n > 0 && (!scalars || !out))) return CUZK_ERR_NULL;
    return guarded([&]() -> int {
        typedef typename G::Affine Affine;
        typedef typename G::Scalar S;
        Affine b = load_affine<G>(base);
        if (!G::is_canonical(b)) return CUZK_ERR_NONCANONICAL;
        if (!G::is_on_curve(b)) return CUZK_ERR_NOT_ON_CURVE;
        for (uint64_t i = 0; i < n; ++i)
            if (!S::is_canonical(scalars + S::N * i)) return CUZK_ERR_NONCANONICAL;
        fixed_base_mul<G>(b, scalars, n, threads, reinterpret_cast<Affine*>(out));
        return CUZK_OK;
    });
}

}  // namespace

extern "C" {

int cuzk_abi_version(void) { return CUZK_ABI_VERSION; }

// ---------------------------------------------------------------- MSM
// bases: n affine points (2L limbs G1 / 4L limbs G2, Montgomery, as in a zkey);
// scalars: n x 4 limbs, standard form (values >= r are reduced mod r);
// out: Jacobian, 3L limbs (G1) / 6L limbs (G2), see header comment.
int cuzk_g1_msm(int curve, const uint64_t* bases, const uint64_t* scalars, uint64_t n,
                int threads, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return msm_impl<typename decltype(c)::G1>(bases, scalars, n, threads, out);
    });
}

int cuzk_g2_msm(int curve, const uint64_t* bases, const uint64_t* scalars, uint64_t n,
                int threads, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return msm_impl<typename decltype(c)::G2>(bases, scalars, n, threads, out);
    });
}

// ---------------------------------------------------------------- NTT
// values: 2^log_n Fr elements, Montgomery form, transformed in place,
// natural order.  inverse != 0: inverse transform including the 1/n scaling.
// log_n <= 28 (BN254) / 32 (BLS12-381).
int cuzk_fr_ntt(int curve, uint64_t* values, uint32_t log_n, int inverse, int threads) {
    return with_curve(curve, [&](auto c) -> int {
        typedef decltype(c) C;
        typedef typename C::Fr F;
        if (!values) return CUZK_ERR_NULL;
        if (log_n > C::FR_MAX_LOG2) return CUZK_ERR_ARG;
        return guarded([&]() -> int {
            const uint64_t n = (uint64_t)1 << log_n;
            for (uint64_t i = 0; i < n; ++i)
                if (!F::is_canonical(values + F::N * i)) return CUZK_ERR_NONCANONICAL;
            F* a = reinterpret_cast<F*>(values);
            if (inverse) ntt_inverse<C>(a, log_n, threads);
            else ntt_forward<C>(a, log_n, threads);
            return CUZK_OK;
        });
    });
}

// ---------------------------------------------------------------- conversions
// field: 0 = Fr, 1 = Fq, 2 = Fq2; in place, n elements.
int cuzk_to_mont(int curve, int field, uint64_t* v, uint64_t n) {
    return convert(curve, field, v, n, true);
}
int cuzk_from_mont(int curve, int field, uint64_t* v, uint64_t n) {
    return convert(curve, field, v, n, false);
}

// ---------------------------------------------------------------- tests
// field: 0 = Fr, 1 = Fq, 2 = Fq2.  op: 0 add, 1 sub, 2 mul, 3 sqr, 4 inv (inv 0 = 0),
// 5 neg, 6 double.  Inputs/outputs Montgomery form, n elements each; b is
// only read for ops 0..2.
int cuzk_field_op(int curve, int field, int op, const uint64_t* a, const uint64_t* b,
                  uint64_t* out, uint64_t n) {
    if (n > 0 && (!a || !out || (op <= 2 && !b))) return CUZK_ERR_NULL;
    if (op < 0 || op > 6) return CUZK_ERR_ARG;
    return with_curve(curve, [&](auto c) -> int {
        typedef decltype(c) C;
        if (field == 0) return field_op_impl<typename C::Fr>(op, a, b, out, n);
        if (field == 1) return field_op_impl<typename C::Fq>(op, a, b, out, n);
        if (field == 2) return field_op_impl<typename C::Fq2>(op, a, b, out, n);
        return CUZK_ERR_ARG;
    });
}

// Point ops on affine inputs (Montgomery), affine output.
// op: 0 = p + q, 1 = 2p, 2 = -p, 3 = k*p with q = k (4 limbs, standard form).
int cuzk_g1_point_op(int curve, int op, const uint64_t* p, const uint64_t* q, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return point_op_impl<typename decltype(c)::G1>(op, p, q, out);
    });
}
int cuzk_g2_point_op(int curve, int op, const uint64_t* p, const uint64_t* q, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return point_op_impl<typename decltype(c)::G2>(op, p, q, out);
    });
}

// Validate n affine points: coordinates canonical and on the curve
// (infinity passes; no subgroup check).  On failure *bad_index (if not NULL) =
// first bad point.
int cuzk_g1_check_points(int curve, const uint64_t* pts, uint64_t n, uint64_t* bad_index) {
    return with_curve(curve, [&](auto c) {
        return guarded([&]() { return check_points_impl<typename decltype(c)::G1>(pts, n, bad_index); });
    });
}
int cuzk_g2_check_points(int curve, const uint64_t* pts, uint64_t n, uint64_t* bad_index) {
    return with_curve(curve, [&](auto c) {
        return guarded([&]() { return check_points_impl<typename decltype(c)::G2>(pts, n, bad_index); });
    });
}

// Jacobian (3L / 6L limbs) -> affine (2L / 4L limbs), Montgomery.
int cuzk_g1_to_affine(int curve, const uint64_t* jac, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return jacobian_to_affine_impl<typename decltype(c)::G1>(jac, out);
    });
}
int cuzk_g2_to_affine(int curve, const uint64_t* jac, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return jacobian_to_affine_impl<typename decltype(c)::G2>(jac, out);
    });
}

// ---------------------------------------------------------------- pairing
// g1: n_pairs G1 affine points (2L limbs), g2: n_pairs G2 affine points (4L limbs),
// Montgomery, all-zero = infinity (that pair contributes 1).  Points must be
// canonical and on the curve (checked: CUZK_ERR_NONCANONICAL, CUZK_ERR_NOT_ON_CURVE)
// and in the order-r subgroups (not checked: the callers do, e.g. verifier.py).
// The value is snarkjs's pairing, e(P, Q)^m with m prime to r (pairing.hpp).

// out: prod e(g1[i], g2[i]) as 12 Fq elements of L limbs, STANDARD form, in the
// reference's flat order: c0.c0, c0.c1, c0.c2, c1.c0, c1.c1, c1.c2 (an Fq12 is
// c0 + c1 w over Fq6, an Fq6 c0 + c1 v + c2 v^2 over Fq2), each Fq2 as its c0
// then c1 (ffjavascript's Gt memory order).
int cuzk_pairing(int curve, const uint64_t* g1, const uint64_t* g2, uint64_t n_pairs,
                 uint64_t* out) {
    if (!out) return CUZK_ERR_NULL;
    return with_pairing(curve, g1, g2, n_pairs, [&](auto c, const auto& r) {
        typedef typename decltype(c)::Fq Fq;
        const Fq* x = &r.c0.c0.c0;
        for (int i = 0; i < 12; ++i) x[i].to_standard(out + Fq::N * i);
    });
}

// *result = 1 if prod e(g1[i], g2[i]) == 1 (one shared final exponentiation), else 0.
int cuzk_pairing_check(int curve, const uint64_t* g1, const uint64_t* g2, uint64_t n_pairs,
                       int* result) {
    if (!result) return CUZK_ERR_NULL;
    return with_pairing(curve, g1, g2, n_pairs, [&](auto c, const auto& r) {
        *result = Pairing<decltype(c)>::is_one12(r) ? 1 : 0;
    });
}

// ---------------------------------------------------------------- QAP
// coef_records: n_coefs packed 44-byte zkey section-4 records (both curves: n8r = 32)
//   (u32 matrix 0=A/1=B, u32 constraint, u32 signal, 32-byte coef*R^2 mod r).
// witness: n_vars x 4 limbs, standard form.
// a_out, b_out: domain_size x 4 limbs each, Montgomery form, fully written.
int cuzk_evaluate_ab(int curve, const uint8_t* coef_records, uint64_t n_coefs,
                     const uint64_t* witness, uint64_t n_vars, uint64_t domain_size,
                     uint64_t* a_out, uint64_t* b_out, int threads) {
    if ((n_coefs > 0 && !coef_records) || (n_vars > 0 && !witness) ||
        (domain_size > 0 && (!a_out || !b_out)))
        return CUZK_ERR_NULL;
    return with_curve(curve, [&](auto c) {
        typedef decltype(c) C;
        typedef typename C::Fr F;
        return guarded([&]() -> int {
            int st = evaluate_ab<C>(coef_records, n_coefs, witness, n_vars, domain_size,
                                    reinterpret_cast<F*>(a_out), reinterpret_cast<F*>(b_out),
                                    threads);
            if (st == QAP_BAD_RECORD) return CUZK_ERR_RECORD;
            if (st == QAP_NONCANONICAL) return CUZK_ERR_NONCANONICAL;
            return CUZK_OK;
        });
    });
}

// a, b: 2^log_n evaluations each (Montgomery); used as scratch (destroyed).
// h_out: 2^log_n x 4 limbs, STANDARD form (ready as MSM scalars):
// h_i = A(g w^i) B(g w^i) - C(g w^i), C = A*B on the domain, g = ROOTS[log_n+1].
int cuzk_compute_h(int curve, uint64_t* a, uint64_t* b, uint32_t log_n, int threads,
                   uint64_t* h_out) {
    if (!a || !b || !h_out) return CUZK_ERR_NULL;
    return with_curve(curve, [&](auto c) -> int {
        typedef decltype(c) C;
        typedef typename C::Fr F;
        if (log_n >= C::FR_MAX_LOG2) return CUZK_ERR_ARG;
        return guarded([&]() -> int {
            const uint64_t n = (uint64_t)1 << log_n;
            for (uint64_t i = 0; i < n; ++i)
                if (!F::is_canonical(a + F::N * i) || !F::is_canonical(b + F::N * i))
                    return CUZK_ERR_NONCANONICAL;
            compute_h<C>(reinterpret_cast<F*>(a), reinterpret_cast<F*>(b), log_n, threads, h_out);
            return CUZK_OK;
        });
    });
}

// ---------------------------------------------------------------- setup
// out[i] = scalars[i] * base.  base: one affine point (Montgomery, on the curve);
// scalars: n x 4 limbs, standard form, each < r; out: n affine points
// (2L / 4L limbs, Montgomery, all zero = infinity), exactly as a zkey stores them.
int cuzk_g1_fixed_base_mul(int curve, const uint64_t* base, const uint64_t* scalars, uint64_t n,
                           int threads, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return fixed_base_impl<typename decltype(c)::G1>(base, scalars, n, threads, out);
    });
}
int cuzk_g2_fixed_base_mul(int curve, const uint64_t* base, const uint64_t* scalars, uint64_t n,
                           int threads, uint64_t* out) {
    return with_curve(curve, [&](auto c) {
        return fixed_base_impl<typename decltype(c)::G2>(base, scalars, n, threads, out);
    });
}

// The scalars of a snarkjs-layout zkey from an r1cs and the toxic waste (see
// setup_scalars in setup_cpu.hpp).  constraints: the r1cs constraint section
// (len bytes, 32-byte coefficients); toxic: 5 x 4 limbs standard form (tau, alpha,
// beta, 1/gamma, 1/delta); a_out, b_out, k_out: n_vars x 4 limbs, h_out:
// 2^log_n x 4 limbs, standard form; coef_out: room for coef_cap 44-byte records,
// *n_coefs = records written.  CUZK_ERR_RECORD: the constraint section is
// malformed; CUZK_ERR_ARG: domain too small/large, capacity short, tau on the domain.
int cuzk_setup_scalars(int curve, const uint8_t* constraints, uint64_t len,
                       uint64_t n_constraints, uint64_t n_vars, uint64_t n_public,
                       uint32_t log_n, const uint64_t* toxic, uint64_t* a_out, uint64_t* b_out,
                       uint64_t* k_out, uint64_t* h_out, uint8_t* coef_out, uint64_t coef_cap,
                       uint64_t* n_coefs, int threads) {
    if ((len > 0 && !constraints) || !toxic || !a_out || !b_out || !k_out || !h_out ||
        (coef_cap > 0 && !coef_out) || !n_coefs)
        return CUZK_ERR_NULL;
    return with_curve(curve, [&](auto c) {
        typedef decltype(c) C;
        return guarded([&]() -> int {
            int st = setup_scalars<C>(constraints, len, n_constraints, n_vars, n_public, log_n,
                                      toxic, a_out, b_out, k_out, h_out, coef_out, coef_cap,
                                      n_coefs, threads);
            switch (st) {
                case SETUP_OK: return CUZK_OK;
                case SETUP_BAD_R1CS: return CUZK_ERR_RECORD;
                case SETUP_NONCANONICAL: return CUZK_ERR_NONCANONICAL;
                default: return CUZK_ERR_ARG;
            }
        });
    });
}

// ---------------------------------------------------------------- whole-file prove
// The exception to "curve first": the curve comes from the zkey (*curve_out, 0 / 1).
// zkey_path, wtns_path: a snarkjs zkey and a circom witness file.  rs: r then s (8 limbs,
// standard form, each < r) or NULL to draw them (getrandom).  verify: self-verify with the
// pairing.  *text_out: a malloc'd proof text (prove_cpu.hpp's proof_text), *text_len its
// length; free it with cuzk_free.  timings_ms: PROVE_STEPS doubles.  CUZK_ERR_FORMAT means
// "let the Python readers say what is wrong": they name the file and the field.
int cuzk_prove_files(const char* zkey_path, const char* wtns_path, const uint64_t* rs,
                     int verify, int threads, int* curve_out, void** text_out,
                     uint64_t* text_len, double* timings_ms) {
    if (!zkey_path || !wtns_path || !curve_out || !text_out || !text_len || !timings_ms)
        return CUZK_ERR_NULL;
    *text_out = nullptr;
    *text_len = 0;
    return guarded([&]() -> int {
        std::string text;
        switch (prove_files(zkey_path, wtns_path, rs, verify != 0, threads, curve_out, text,
                            timings_ms)) {
            case PROVE_OK: break;
            case PROVE_IO: return CUZK_ERR_IO;
            case PROVE_UNSATISFIED: return CUZK_ERR_UNSATISFIED;
            case PROVE_RANDOM: return CUZK_ERR_RANDOM;
            default: return CUZK_ERR_FORMAT;
        }
        void* buf = std::malloc(text.size());
        if (!buf) return CUZK_ERR_NOMEM;
        std::memcpy(buf, text.data(), text.size());
        *text_out = buf;
        *text_len = text.size();
        return CUZK_OK;
    });
}

void cuzk_free(void* p) { std::free(p); }

}  // extern "C"

// ---------------------------------------------------------------- Python
// The shared object is built as a CPython extension only so that pip compiles
// it; the module itself is empty.  Python loads the C ABI above via ctypes.
static struct PyModuleDef cuzk_native_module = {
    PyModuleDef_HEAD_INIT, "_native",
    "cuzk-tasks native CPU core (C ABI, loaded via ctypes by cuzk_tasks.groth16.backends.native)", -1,
    nullptr, nullptr, nullptr, nullptr, nullptr};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&cuzk_native_module); }
