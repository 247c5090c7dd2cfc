// Host-only Pippenger multi-scalar multiplication for G1 and G2.
//
// Algorithm
//   * scalars (4 limbs, standard form, reduced mod r) are recoded into signed
//     c-bit digits d in [-2^(c-1), 2^(c-1)], W = floor(bits(r)/c) + 1 windows; each
//     window's digit is computed on the fly (see SignedDigit);
//   * bucket |d|-1 of window w accumulates sign(d)*P.  Buckets are affine and
//     are filled with *batched affine additions*: up to B independent
//     additions share one field inversion (Montgomery's trick), i.e. about
//     6 multiplications per addition.  An addition whose bucket is already
//     pending in the current batch is deferred and retried once after the
//     next flush; if it conflicts again (or the deferral queue is full) it goes
//     to a second, XYZZ bucket with a mixed addition instead, so skewed scalar
//     distributions (many equal scalars) stay fast;
//   * buckets are reduced with the running-sum trick in XYZZ coordinates;
//   * work units are (window group, point-range) pairs pulled from an atomic
//     counter by `threads` std::threads.  A group is up to 8 windows filled in one pass
//     over the points, each with its own buckets, so that a batch can be as many times
//     larger (one inversion per more additions) at the same rate of conflicts; partial
//     window sums are combined with c doublings per window at the end.
// Zero digits and points at infinity (all-zero rows) are skipped; when zero scalars and
// infinity bases are many, they are dropped before the windows (PippengerMsm::compact).
// On G1, from 64 to 2^17 points, scalars are split by the curve's endomorphism (GLV,
// below) into two of 128 bits, so there are half as many windows.  Several MSMs can share
// one pool of units (PippengerMsm::Batch: the whole-file prover's MSMs).
#ifndef CUZK_MSM_CPU_HPP
#define CUZK_MSM_CPU_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "curve.cuh"
#include "parallel.hpp"

namespace cuzk {

// ---------------------------------------------------------------------------
// scalar handling (Fr: the scalar field, 4 limbs for both curves)
// ---------------------------------------------------------------------------
template <class Fr>
inline bool geq_r(const uint64_t* s) {
    static_assert(Fr::N == 4, "MSM scalars are 4 limbs");
    return !Fr::is_canonical(s);
}

template <class Fr>
inline void reduce_scalar(const uint64_t* in, uint64_t* out) {
    out[0] = in[0]; out[1] = in[1]; out[2] = in[2]; out[3] = in[3];
    while (geq_r<Fr>(out)) {
        uint64_t b = 0;
        for (int i = 0; i < 4; ++i) b = sub_borrow(out[i], Fr::modulus_limbs().v[i], b, &out[i]);
    }
}

inline uint64_t extract_bits(const uint64_t* s, int pos, int len) {
    int limb = pos >> 6, off = pos & 63;
    if (limb >= 4) return 0;
    uint64_t v = s[limb] >> off;
    if (off + len > 64 && limb + 1 < 4) v |= s[limb + 1] << (64 - off);
    return v & ((len >= 64) ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1));
}

// Signed c-bit digit of window w, computed directly from the scalar.
//
// The usual recoding runs from the bottom window with a carry: raw = bits + carry,
// digit = raw - 2^c and carry = 1 if raw > 2^(c-1), else digit = raw, carry = 0.
// By induction, the carry into window w is 1 exactly when
// (s mod 2^(w c)) > H_w = sum_{i<w} 2^(c-1) 2^(i c), so each window can be
// recoded independently (no W x n digit table is needed).
// code = (|digit| << 1) | (digit < 0); 0 means "no contribution".
struct SignedDigit {
    int pos, c;
    uint64_t half, full;
    uint64_t H[4];  // H_w, little-endian; H_w < 2^pos

    SignedDigit(int c_, int w) : pos(w * c_), c(c_) {
        half = (uint64_t)1 << (c - 1);
        full = (uint64_t)1 << c;
        H[0] = H[1] = H[2] = H[3] = 0;
        for (int i = 0; i < w; ++i) {  // H += half << (i c)
            const int bit = i * c + c - 1;
            if (bit >= 256) break;
            uint64_t add[4] = {0, 0, 0, 0};
            add[bit >> 6] = (uint64_t)1 << (bit & 63);
            uint64_t cy = 0;
            for (int l = 0; l < 4; ++l) cy = add_carry(H[l], add[l], cy, &H[l]);
        }
    }

    // (s mod 2^pos) > H
    inline bool low_gt(const uint64_t* s) const {
        for (int l = 3; l >= 0; --l) {
            uint64_t v;
            if (l * 64 >= pos) v = 0;
            else if ((l + 1) * 64 > pos) v = s[l] & (((uint64_t)1 << (pos - l * 64)) - 1);
            else v = s[l];
            if (v != H[l]) return v > H[l];
        }
        return false;
    }

    inline uint32_t code(const uint64_t* s) const {
        uint64_t raw = extract_bits(s, pos, c) + (pos > 0 && low_gt(s) ? 1 : 0);
        if (raw > half) {
            uint64_t mag = full - raw;
            return mag ? (uint32_t)((mag << 1) | 1) : 0;
        }
        return (uint32_t)(raw << 1);
    }
};

struct MsmPlan {
    int c;        // window bits
    int windows;  // number of windows
    int chunks;   // point ranges per window
    int wpu;      // windows per work unit (their buckets are filled in one pass)
    int batch;    // batch-affine batch size (0 = XYZZ only)
};

inline int msm_num_windows(int c, int scalar_bits) { return scalar_bits / c + 1; }

// The batch-affine batch for a unit of `wpu` windows of `nb` buckets each over `per` points:
// additions in one batch need distinct buckets, so the batch is kept to a quarter of the
// unit's buckets (few deferred conflicts), to half its points, and to 2048 (4096 was 20%
// slower at 2^20 points, 1024 9%: measured).  0: XYZZ only, faster for small batches
// (measured).
inline int msm_batch(uint64_t nb, int wpu, uint64_t per) {
    uint64_t b = std::min<uint64_t>(nb * (uint64_t)wpu / 4, 2048);
    b = std::min<uint64_t>(b, per * (uint64_t)wpu / 2);
    return b < 64 ? 0 : (int)b;
}

// A field inversion in multiplications of that field (Fermat: ~1.5 bits of them; in Fq2,
// one of Fq plus a few, and an Fq2 multiplication is ~3 of Fq).
template <class F>
struct MsmInversionCost {
    static constexpr double value = 1.5 * F::BITS;
};
template <class B>
struct MsmInversionCost<Fq2T<B>> {
    static constexpr double value = (1.5 * B::BITS + 6.0) / 3.0;
};

// The cost of an affine bucket addition in field multiplications, for a batch of `batch`
// additions sharing one inversion; an XYZZ mixed addition when there is no batch.
inline double msm_add_cost(int batch, double inversion) {
    return batch ? 7.0 + inversion / batch : 13.0;
}

// Pick the window size, the point ranges and the windows per unit from a cost model in
// field multiplications: accumulation msm_add_cost per (point, window), reduction ~24 per
// bucket, the imbalance of splitting units over threads (whole rounds, plus half a unit),
// and the doublings that combine the windows.  Several windows per unit share one pass over the points and let a batch
// of affine additions be as many times larger (fewer inversions per addition); their
// affine buckets are kept within 128 KiB on G1 (more was slower on two threads, measured).
inline MsmPlan msm_plan(uint64_t n, int threads, int scalar_bits, double inversion) {
    MsmPlan best = {1, msm_num_windows(1, scalar_bits), 1, 1, 0};
    double best_cost = 1e300;
    for (int c = 1; c <= 20; ++c) {
        const int W = msm_num_windows(c, scalar_bits);
        const uint64_t nb = (uint64_t)1 << (c - 1);
        for (int chunks = 1; chunks <= 64; chunks *= 2) {
            if ((uint64_t)chunks > std::max<uint64_t>(1, n / 4096)) break;
            const uint64_t per = n / (uint64_t)chunks;
            for (int wpu = 1; wpu <= 8 && wpu <= W; wpu *= 2) {
                if (wpu > 1 && nb * (uint64_t)wpu > 2048) break;
                const int batch = n >= 512 ? msm_batch(nb, wpu, per) : 0;
                const int units = (W + wpu - 1) / wpu * chunks;
                const double per_unit = (double)per * wpu * msm_add_cost(batch, inversion) +
                                        (double)nb * wpu * 24.0 + 500.0;
                // + half a unit: threads do not run at one speed, and the last unit's
                // tail is what the others wait for
                const double rounds = (units + threads - 1) / threads + (threads > 1 ? 0.5 : 0.0);
                const double cost = rounds * per_unit + (double)W * c * 12.0 * chunks;
                if (cost < best_cost) {
                    best_cost = cost;
                    best = {c, W, chunks, wpu, batch};
                }
            }
        }
    }
    return best;
}

// ---------------------------------------------------------------------------
// GLV: on G1 of both curves phi(x, y) = (beta x, y) is lambda (x, y) (beta, lambda cube
// roots of unity), so k P = k1 P + k2 phi(P) with |k1|, |k2| < 2^128: twice the points
// with half the windows, i.e. the same bucket additions but half the bucket reductions
// and doublings.  Constants: tools/gen_curve_constants.py (_glv), which also proves the
// bound on the halves; glv_split still checks it and declines past it.
// ---------------------------------------------------------------------------
template <class C>
struct Glv {
    static constexpr bool available = false;
};

#define CUZK_GLV(CURVE, PFX)                                                              \
    template <>                                                                           \
    struct Glv<CURVE::G1> {                                                               \
        static constexpr bool available = true;                                           \
        static constexpr int BITS = PFX##_GLV_BITS;                                       \
        static constexpr uint64_t beta[CURVE::Fq::N] = {PFX##_GLV_BETA_LIMBS};           \
        static constexpr uint64_t a1[4] = {PFX##_GLV_A1_LIMBS}, b1[4] = {PFX##_GLV_B1_LIMBS}; \
        static constexpr uint64_t a2[4] = {PFX##_GLV_A2_LIMBS}, b2[4] = {PFX##_GLV_B2_LIMBS}; \
        static constexpr uint64_t g1[4] = {PFX##_GLV_G1_LIMBS}, g2[4] = {PFX##_GLV_G2_LIMBS}; \
        static constexpr bool a1_neg = PFX##_GLV_A1_NEG, b1_neg = PFX##_GLV_B1_NEG;        \
        static constexpr bool a2_neg = PFX##_GLV_A2_NEG, b2_neg = PFX##_GLV_B2_NEG;        \
    };
CUZK_GLV(BN254, CUZK)
CUZK_GLV(BLS12_381, CUZK_BLS12_381)
#undef CUZK_GLV

// x * y (4 limbs each) -> p (8 limbs)
inline void mul_4x4(const uint64_t* x, const uint64_t* y, uint64_t* p) {
    for (int i = 0; i < 8; ++i) p[i] = 0;
    for (int i = 0; i < 4; ++i) {
        if (!x[i]) continue;
        uint64_t carry = 0;
        for (int j = 0; j < 4; ++j) {
            const unsigned __int128 t = (unsigned __int128)x[i] * y[j] + p[i + j] + carry;
            p[i + j] = (uint64_t)t;
            carry = (uint64_t)(t >> 64);
        }
        p[i + 4] = carry;
    }
}

// acc (6 limbs, two's complement) -= x * y, or += when `add`; |x y| < 2^384
inline void glv_mac(uint64_t* acc, const uint64_t* x, const uint64_t* y, bool add) {
    uint64_t p[8];
    mul_4x4(x, y, p);
    uint64_t c = 0;
    for (int i = 0; i < 6; ++i)
        c = add ? add_carry(acc[i], p[i], c, &acc[i]) : sub_borrow(acc[i], p[i], c, &acc[i]);
}

// |v| into mag (4 limbs) and its sign, or false when |v| >= 2^bits (bits <= 128)
inline bool glv_half(const uint64_t* v, int bits, uint64_t* mag, bool* negative) {
    uint64_t t[6];
    *negative = (v[5] >> 63) != 0;
    if (*negative) {
        uint64_t b = 0;
        for (int i = 0; i < 6; ++i) b = sub_borrow(0, v[i], b, &t[i]);
    } else {
        for (int i = 0; i < 6; ++i) t[i] = v[i];
    }
    for (int i = 2; i < 6; ++i)
        if (t[i]) return false;
    if (bits < 128 && (t[1] >> (bits - 64))) return false;
    mag[0] = t[0];
    mag[1] = t[1];
    mag[2] = mag[3] = 0;
    return true;
}

// k = k1 + k2 lambda (mod r), k < r (standard form): magnitudes and signs of k1, k2.
template <class G>
inline bool glv_decompose(const uint64_t* k, uint64_t* m1, bool* n1, uint64_t* m2, bool* n2) {
    typedef Glv<G> P;
    uint64_t p[8], c1[4], c2[4];
    mul_4x4(k, P::g1, p);
    for (int i = 0; i < 4; ++i) c1[i] = p[4 + i];
    mul_4x4(k, P::g2, p);
    for (int i = 0; i < 4; ++i) c2[i] = p[4 + i];
    uint64_t k1[6] = {k[0], k[1], k[2], k[3], 0, 0}, k2[6] = {0, 0, 0, 0, 0, 0};
    glv_mac(k1, c1, P::a1, P::a1_neg);  // k1 = k - c1 a1 - c2 a2
    glv_mac(k1, c2, P::a2, P::a2_neg);
    glv_mac(k2, c1, P::b1, P::b1_neg);  // k2 = -c1 b1 - c2 b2
    glv_mac(k2, c2, P::b2, P::b2_neg);
    return glv_half(k1, P::BITS, m1, n1) && glv_half(k2, P::BITS, m2, n2);
}

// ---------------------------------------------------------------------------
// Pippenger
// ---------------------------------------------------------------------------
template <class C>
class PippengerMsm {
  public:
    typedef typename C::Field F;
    typedef typename C::Affine Affine;
    typedef typename C::XYZZ XYZZ;
    typedef typename C::Scalar Fr;

    // Several MSMs over C sharing one pool of work units: add() prepares each (its plan,
    // and copies where it must), then work() pulls (window group, point range) units of
    // any of them until none is left.  work() may run on any number of threads, each
    // joining when it is free (the whole-file prover starts the G1 MSMs on one thread
    // while another computes H); add() is not called while they run, and result() and
    // unit_ms() are read after every work() has returned.
    class Batch {
      public:
        // bases: n affine points; scalars: n x 4 limbs standard form (Fr = C::Scalar);
        // both are read until `done` is called (from the thread that finished the MSM's
        // last unit, or here when it has none), or else until the last work() returns.
        // `threads`: for the preparing passes, and the plan's split.  Returns the index.
        int add(const Affine* bases, const uint64_t* scalars, uint64_t n, int threads,
                std::function<void()> done = nullptr) {
            threads = resolve_threads(threads);
            jobs_.emplace_back(new Job());
            Job& job = *jobs_.back();
            job.first_unit = total_units_;
            if (n > 0) prepare(job, bases, scalars, n, threads);
            total_units_ += job.units;
            job.remaining = job.units;
            job.done = std::move(done);
            if (job.units == 0 && job.done) job.done();
            return (int)jobs_.size() - 1;
        }

        int units() const { return total_units_; }

        void work() {
            std::unique_ptr<Worker> wk;
            std::vector<SignedDigit> digits;
            size_t j = 0;
            for (;;) {
                const int u = next_.fetch_add(1);
                if (u >= total_units_) break;
                while (u >= jobs_[j]->first_unit + jobs_[j]->units) ++j;
                Job& job = *jobs_[j];
                const auto t0 = std::chrono::steady_clock::now();
                const MsmPlan& plan = job.plan;
                const uint64_t nb = (uint64_t)1 << (plan.c - 1);
                if (!wk || wk->nb != nb || wk->nbt != nb * (uint64_t)plan.wpu || wk->batch != plan.batch)
                    wk.reset(new Worker(nb, plan.wpu, plan.batch));
                const int K = plan.chunks, local = u - job.first_unit;
                const int g = local / K, k = local % K;
                const uint64_t b = job.n * (uint64_t)k / (uint64_t)K;
                const uint64_t e = job.n * (uint64_t)(k + 1) / (uint64_t)K;
                const int w0 = g * plan.wpu, nw = std::min(plan.wpu, plan.windows - w0);
                digits.clear();
                for (int i = 0; i < nw; ++i) digits.emplace_back(plan.c, w0 + i);
                wk->unit(job.bases, job.sc, digits.data(), nw, b, e);
                XYZZ sums[8];
                wk->window_sums(nw, sums);
                for (int i = 0; i < nw; ++i) job.partial[(size_t)(w0 + i) * K + k] = sums[i];
                job.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - t0).count();
                if (job.remaining.fetch_sub(1) == 1 && job.done) job.done();
            }
        }

        // sum_w 2^(c*w) * S_w of MSM i
        XYZZ result(int i) const {
            const Job& job = *jobs_[(size_t)i];
            XYZZ acc = XYZZ::infinity();
            const int c = job.plan.c, W = job.plan.windows, K = job.plan.chunks;
            if (job.units == 0) return acc;
            for (int w = W - 1; w >= 0; --w) {
                if (w != W - 1)
                    for (int b = 0; b < c; ++b) acc = C::xyzz_dbl(acc);
                for (int k = 0; k < K; ++k) acc = C::xyzz_add(acc, job.partial[(size_t)w * K + k]);
            }
            return acc;
        }

        // thread-milliseconds spent on MSM i's units
        double unit_ms(int i) const { return jobs_[(size_t)i]->ns.load() / 1e6; }

      private:
        struct Job {
            const Affine* bases = nullptr;
            const uint64_t* sc = nullptr;
            uint64_t n = 0;
            MsmPlan plan = {1, 1, 1, 1, 0};
            int first_unit = 0, units = 0;
            std::vector<uint64_t> reduced, live_scalars, glv_scalars;
            std::vector<Affine> live_bases, glv_bases;
            std::vector<XYZZ> partial;
            std::atomic<int64_t> ns{0};
            std::atomic<int> remaining{0};
            std::function<void()> done;
        };

        static void prepare(Job& job, const Affine* bases, const uint64_t* scalars, uint64_t n,
                            int threads) {
            // 1. scalars >= r (not expected, but allowed) are reduced into a copy.
            const uint64_t* sc = scalars;
            bool need_reduce = false;
            for (uint64_t i = 0; i < n && !need_reduce; ++i) need_reduce = geq_r<Fr>(scalars + 4 * i);
            if (need_reduce) {
                job.reduced.resize((size_t)n * 4);
                parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
                    for (uint64_t i = b; i < e; ++i)
                        reduce_scalar<Fr>(scalars + 4 * i, &job.reduced[(size_t)i * 4]);
                });
                sc = job.reduced.data();
            }
            // 1b. points that cannot contribute (a base at infinity: most of a Poseidon
            // circuit's A and B columns; a zero scalar) leave when they are many, so that the
            // window choice, the work split and every window's pass scale with the points
            // that count.
            const uint64_t live = compact(bases, sc, n, threads, job.live_bases, job.live_scalars);
            if (live == 0) return;
            if (!job.live_bases.empty()) {
                bases = job.live_bases.data();
                sc = job.live_scalars.data();
                n = live;
            }
            // 1c. GLV on G1: 2n points of half-length scalars.  Above 2^17 points the
            // reductions it halves are a few percent of the work, and the copy (96 bytes a
            // point) would be most of the memory.
            int bits = Fr::BITS;
            if (glv_split(bases, sc, n, threads, job.glv_bases, job.glv_scalars)) {
                bases = job.glv_bases.data();
                sc = job.glv_scalars.data();
                n *= 2;
                bits = glv_bits();
                // the split copies replace the compacted and reduced ones: free those now,
                // not when the whole batch ends
                std::vector<Affine>().swap(job.live_bases);
                std::vector<uint64_t>().swap(job.live_scalars);
                std::vector<uint64_t>().swap(job.reduced);
            }
            MsmPlan plan = msm_plan(n, threads, bits, MsmInversionCost<F>::value);
            if (const char* env = std::getenv("CUZK_MSM_WINDOW")) {  // tuning/debug override
                int cw = std::atoi(env);
                if (cw >= 2 && cw <= 22) {
                    plan.c = cw;
                    plan.windows = msm_num_windows(cw, bits);
                    plan.wpu = 1;
                    plan.batch = n >= 512 ? msm_batch((uint64_t)1 << (cw - 1), 1, n / plan.chunks) : 0;
                }
            }
            job.bases = bases;
            job.sc = sc;
            job.n = n;
            job.plan = plan;
            job.units = (plan.windows + plan.wpu - 1) / plan.wpu * plan.chunks;
            job.partial.assign((size_t)plan.windows * plan.chunks, XYZZ::infinity());
        }

        static constexpr int glv_bits() {
            if constexpr (Glv<C>::available) return Glv<C>::BITS;
            return Fr::BITS;
        }

        // out: P_i with k1_i and phi(P_i) with k2_i (signs folded into the points), or
        // false (out left empty) where GLV does not apply or a half is out of bounds.
        static bool glv_split(const Affine* bases, const uint64_t* sc, uint64_t n, int threads,
                              std::vector<Affine>& out_b, std::vector<uint64_t>& out_s) {
            if constexpr (!Glv<C>::available) {
                return false;
            } else {
                if (n < 64 || n > ((uint64_t)1 << 17)) return false;
                out_b.resize((size_t)n * 2);
                out_s.resize((size_t)n * 8);
                const F beta = F::from_raw(Glv<C>::beta);
                std::atomic<bool> ok(true);
                parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
                    for (uint64_t i = b; i < e; ++i) {
                        bool n1, n2;
                        uint64_t* s1 = &out_s[(size_t)i * 8];
                        if (!glv_decompose<C>(sc + 4 * i, s1, &n1, s1 + 4, &n2)) {
                            ok.store(false);
                            return;
                        }
                        Affine p = bases[i], q = bases[i];
                        q.x = F::mul(beta, q.x);
                        if (n1) p.y = F::neg(p.y);
                        if (n2) q.y = F::neg(q.y);
                        out_b[(size_t)i * 2] = p;
                        out_b[(size_t)i * 2 + 1] = q;
                    }
                });
                if (!ok.load()) {
                    std::vector<Affine>().swap(out_b);
                    std::vector<uint64_t>().swap(out_s);
                }
                return ok.load();
            }
        }

        std::vector<std::unique_ptr<Job>> jobs_;
        std::atomic<int> next_{0};
        int total_units_ = 0;
    };

    // One MSM on `threads` threads.
    static XYZZ run(const Affine* bases, const uint64_t* scalars, uint64_t n, int threads) {
        threads = resolve_threads(threads);
        Batch batch;
        batch.add(bases, scalars, n, threads);
        run_threads(std::max(1, std::min(threads, batch.units())), [&](int) { batch.work(); });
        return batch.result(0);
    }

  private:
    // The number of points with a base off infinity and a nonzero scalar.  When the others
    // are at least an eighth of the input, the contributing ones are also copied, in order,
    // into out_b / out_s (left empty otherwise: a copy of a dense input would cost memory
    // for nothing).  Two parallel passes over fixed ranges: count, then copy at the prefix.
    static uint64_t compact(const Affine* bases, const uint64_t* sc, uint64_t n, int threads,
                            std::vector<Affine>& out_b, std::vector<uint64_t>& out_s) {
        const int t = (int)std::min<uint64_t>((uint64_t)threads, std::max<uint64_t>(1, n / 4096));
        auto contributes = [&](uint64_t i) {
            const uint64_t* s = sc + 4 * i;
            return (s[0] | s[1] | s[2] | s[3]) != 0 && !bases[i].is_inf();
        };
        std::vector<uint64_t> start((size_t)t + 1, 0);
        run_threads(t, [&](int tid) {
            uint64_t count = 0;
            for (uint64_t i = n * (uint64_t)tid / t, e = n * (uint64_t)(tid + 1) / t; i < e; ++i)
                count += contributes(i);
            start[(size_t)tid + 1] = count;
        });
        for (int i = 0; i < t; ++i) start[(size_t)i + 1] += start[(size_t)i];
        const uint64_t live = start[(size_t)t];
        if (live == 0 || n - live < n / 8) return live;
        out_b.resize((size_t)live);
        out_s.resize((size_t)live * 4);
        run_threads(t, [&](int tid) {
            uint64_t o = start[(size_t)tid];
            for (uint64_t i = n * (uint64_t)tid / t, e = n * (uint64_t)(tid + 1) / t; i < e; ++i) {
                if (!contributes(i)) continue;
                out_b[(size_t)o] = bases[i];
                std::memcpy(&out_s[(size_t)o * 4], sc + 4 * i, 32);
                ++o;
            }
        });
        return live;
    }

    // One thread's buckets: wpu windows x nb buckets, bucket |d|-1 of window i at i*nb.
    struct Worker {
        uint64_t nb, nbt;  // buckets per window, in all
        int batch;
        std::vector<Affine> abk;      // affine buckets (infinity = empty)
        std::vector<XYZZ> xbk;        // XYZZ overflow buckets
        std::vector<uint32_t> xstamp; // xbk[b] valid iff xstamp[b] == unit_id
        std::vector<uint32_t> bstamp; // bucket pending in batch iff bstamp[b] == batch_id
        uint32_t unit_id = 0, batch_id = 0;
        // current batch
        std::vector<uint32_t> op_bucket;
        std::vector<Affine> op_point;
        std::vector<F> op_den, op_acc;
        int op_count = 0;
        // deferred (conflicting) additions, retried after the next flush
        std::vector<uint32_t> q_bucket, d_bucket;
        std::vector<Affine> q_point, d_point;
        size_t q_count = 0;
        bool draining = false;

        Worker(uint64_t nb_, int wpu, int batch_) : nb(nb_), nbt(nb_ * (uint64_t)wpu), batch(batch_) {
            abk.resize(nbt);
            xbk.resize(nbt);
            xstamp.assign(nbt, 0);
            bstamp.assign(nbt, 0);
            if (batch > 0) {
                op_bucket.resize((size_t)batch);
                op_point.resize((size_t)batch);
                op_den.resize((size_t)batch);
                op_acc.resize((size_t)batch);
                q_bucket.resize((size_t)batch);
                d_bucket.resize((size_t)batch);
                q_point.resize((size_t)batch);
                d_point.resize((size_t)batch);
            }
        }

        inline void add_xyzz(uint64_t b, const Affine& p) {
            if (xstamp[b] != unit_id) {
                xstamp[b] = unit_id;
                xbk[b] = C::to_xyzz(p);
            } else {
                xbk[b] = C::xyzz_add_mixed(xbk[b], p);
            }
        }

        // Slope numerator: y2 - y1, or 3x^2 for a doubling (denominators were
        // chosen accordingly in add_affine).
        static inline F numerator(const Affine& B, const Affine& P) {
            if (__builtin_expect(F::eq(P.x, B.x), 0)) {
                F x2 = F::sqr(B.x);
                return F::add(F::dbl(x2), x2);
            }
            return F::sub(P.y, B.y);
        }

        // Apply all pending additions with one inversion (Montgomery's trick).
        // Two interleaved product chains hide the multiplication latency.
        void flush() {
            const int m = op_count;
            if (m == 0) return;
            F acc[2] = {F::one(), F::one()};
            for (int k = 0; k < m; ++k) {
                op_acc[(size_t)k] = acc[k & 1];
                acc[k & 1] = F::mul(acc[k & 1], op_den[(size_t)k]);
            }
            F tinv = F::inv(F::mul(acc[0], acc[1]));
            F inv[2] = {F::mul(tinv, acc[1]), F::mul(tinv, acc[0])};
            // Two additions per iteration, written interleaved so the CPU can
            // overlap their dependency chains (they use different inverse chains
            // and, by construction, different buckets).
            int k = m - 1;
            for (; k >= 1; k -= 2) {
                const size_t k0 = (size_t)k, k1 = (size_t)k - 1;
                Affine& B0 = abk[op_bucket[k0]];
                Affine& B1 = abk[op_bucket[k1]];
                const Affine& P0 = op_point[k0];
                const Affine& P1 = op_point[k1];
                F n0 = numerator(B0, P0);
                F n1 = numerator(B1, P1);
                F d0 = F::mul(op_acc[k0], inv[k0 & 1]);
                F d1 = F::mul(op_acc[k1], inv[k1 & 1]);
                inv[k0 & 1] = F::mul(inv[k0 & 1], op_den[k0]);
                inv[k1 & 1] = F::mul(inv[k1 & 1], op_den[k1]);
                F l0 = F::mul(n0, d0);
                F l1 = F::mul(n1, d1);
                F s0 = F::sqr(l0);
                F s1 = F::sqr(l1);
                F x0 = F::sub(F::sub(s0, B0.x), P0.x);
                F x1 = F::sub(F::sub(s1, B1.x), P1.x);
                F t0 = F::mul(l0, F::sub(B0.x, x0));
                F t1 = F::mul(l1, F::sub(B1.x, x1));
                F y0 = F::sub(t0, B0.y);
                F y1 = F::sub(t1, B1.y);
                B0.x = x0;
                B0.y = y0;
                B1.x = x1;
                B1.y = y1;
            }
            if (k == 0) {
                Affine& B = abk[op_bucket[0]];
                const Affine& P = op_point[0];
                F lambda = F::mul(numerator(B, P), F::mul(op_acc[0], inv[0]));
                F x3 = F::sub(F::sub(F::sqr(lambda), B.x), P.x);
                F y3 = F::sub(F::mul(lambda, F::sub(B.x, x3)), B.y);
                B.x = x3;
                B.y = y3;
            }
            op_count = 0;
            ++batch_id;
        }

        // Queue an affine addition into bucket b.  `retry` is false for
        // first attempts: a conflicting first attempt is deferred to the next
        // batch (if there is room), a conflicting retry goes to the XYZZ bucket.
        inline void add_affine(uint64_t b, const Affine& p, bool retry) {
            Affine& B = abk[b];
            if (bstamp[b] == batch_id) {  // already pending in this batch
                if (!retry && q_count < (size_t)batch) {
                    q_bucket[q_count] = (uint32_t)b;
                    q_point[q_count] = p;
                    ++q_count;
                } else {
                    add_xyzz(b, p);
                }
                return;
            }
            if (B.is_inf()) {
                B = p;
                return;
            }
            F den;
            if (F::eq(B.x, p.x)) {
                if (!F::eq(B.y, p.y) || B.y.is_zero()) {  // P + (-P)
                    B = Affine::infinity();
                    return;
                }
                den = F::dbl(B.y);
            } else {
                den = F::sub(p.x, B.x);
            }
            const size_t k = (size_t)op_count++;
            op_bucket[k] = (uint32_t)b;
            op_point[k] = p;
            op_den[k] = den;
            bstamp[b] = batch_id;
            if (op_count == batch) {
                flush();
                drain();
            }
        }

        // Retry the deferred additions once, into the (fresh) current batch.
        void drain() {
            if (q_count == 0 || draining) return;
            draining = true;
            const size_t cnt = q_count;
            q_count = 0;
            std::swap(q_bucket, d_bucket);
            std::swap(q_point, d_point);
            for (size_t i = 0; i < cnt; ++i) add_affine(d_bucket[i], d_point[i], true);
            draining = false;
        }

        // Fill the buckets of windows digits[0..nw) from points [begin, end).
        void unit(const Affine* bases, const uint64_t* scalars, const SignedDigit* digits,
                  int nw, uint64_t begin, uint64_t end) {
            ++unit_id;
            ++batch_id;
            if (unit_id == 0) {  // wrapped: reset stamps
                std::fill(xstamp.begin(), xstamp.end(), 0u);
                unit_id = 1;
            }
            if (batch_id == 0) {
                std::fill(bstamp.begin(), bstamp.end(), 0u);
                batch_id = 1;
            }
            const bool use_affine = batch > 0;
            if (use_affine) std::memset((void*)abk.data(), 0, sizeof(Affine) * nb * (uint64_t)nw);
            const uint64_t BLK = 64, PF = 6;
            uint32_t codes[8][BLK];
            for (uint64_t i0 = begin; i0 < end; i0 += BLK) {
                const uint64_t cnt = std::min<uint64_t>(BLK, end - i0);
                for (int wi = 0; wi < nw; ++wi)
                    for (uint64_t j = 0; j < cnt; ++j) codes[wi][j] = digits[wi].code(scalars + 4 * (i0 + j));
                for (uint64_t j = 0; j < cnt; ++j) {
                    if (j + PF < cnt) {
                        __builtin_prefetch(&bases[i0 + j + PF], 0, 0);
                        for (int wi = 0; wi < nw; ++wi) {
                            const uint32_t cpf = codes[wi][j + PF];
                            if (!cpf) continue;
                            const uint64_t bpf = (uint64_t)wi * nb + (cpf >> 1) - 1;
                            if (use_affine) __builtin_prefetch(&abk[bpf], 1, 1);
                            else __builtin_prefetch(&xbk[bpf], 1, 1);
                        }
                    }
                    const Affine& base = bases[i0 + j];
                    if (base.is_inf()) continue;
                    for (int wi = 0; wi < nw; ++wi) {
                        const uint32_t code = codes[wi][j];
                        if (!code) continue;
                        Affine p = base;
                        const uint64_t b = (uint64_t)wi * nb + (code >> 1) - 1;
                        if (code & 1) p.y = F::neg(p.y);
                        if (use_affine) add_affine(b, p, false);
                        else add_xyzz(b, p);
                    }
                }
            }
            if (use_affine) {
                flush();
                while (q_count > 0) {
                    drain();
                    flush();
                }
            }
        }

        // out[i] = sum_j (j+1) * bucket j of window i of the last unit, i < nw (running
        // sums).  Each sum is a chain of dependent additions, so the windows' chains run
        // side by side, and a lone window's two halves do (the upper half's is
        // sum_j (j+1) B_{len+j} + len * sum_j B_{len+j}).
        void window_sums(int nw, XYZZ* out) const {
            const bool use_affine = batch > 0;
            const int halves = (nw == 1 && nb >= 4) ? 2 : 1;
            const uint64_t len = nb / (uint64_t)halves;
            const int lanes = nw * halves;
            XYZZ running[8], sum[8];
            for (int l = 0; l < lanes; ++l) running[l] = sum[l] = XYZZ::infinity();
            for (uint64_t j = len; j-- > 0;) {
                for (int l = 0; l < lanes; ++l) {
                    const uint64_t b = (uint64_t)(l / halves) * nb + (uint64_t)(l % halves) * len + j;
                    if (use_affine && !abk[b].is_inf()) running[l] = C::xyzz_add_mixed(running[l], abk[b]);
                    if (xstamp[b] == unit_id) running[l] = C::xyzz_add(running[l], xbk[b]);
                    sum[l] = C::xyzz_add(sum[l], running[l]);
                }
            }
            for (int i = 0; i < nw; ++i) {
                XYZZ total = sum[i * halves];
                if (halves == 2) {
                    XYZZ upper = running[i * halves + 1];
                    for (uint64_t m = len; m > 1; m >>= 1) upper = C::xyzz_dbl(upper);
                    total = C::xyzz_add(C::xyzz_add(total, sum[i * halves + 1]), upper);
                }
                out[i] = total;
            }
        }
    };
};

}  // namespace cuzk

#endif  // CUZK_MSM_CPU_HPP
