// Host-only Pippenger multi-scalar multiplication for G1 and G2.
//
// Algorithm
//   * scalars (standard form, reduced mod r) are recoded into signed c-bit
//     digits d in [-2^(c-1), 2^(c-1)], W = floor(254/c) + 1 windows;
//   * bucket |d|-1 of window w accumulates sign(d)*P.  Buckets are affine and
//     are filled with *batched affine additions*: up to B independent
//     additions share one field inversion (Montgomery's trick), i.e. about
//     6 multiplications per addition.  An addition whose bucket is already
//     pending in the current batch goes to a second, XYZZ bucket with a
//     mixed addition instead (so skewed scalar distributions stay fast);
//   * buckets are reduced with the running-sum trick in XYZZ coordinates;
//   * work units are (window, point-range) pairs pulled from an atomic
//     counter by `threads` std::threads; partial window sums are combined
//     with c doublings per window at the end.
// Zero digits and points at infinity (all-zero rows) are skipped.
#ifndef CUZK_MSM_CPU_HPP
#define CUZK_MSM_CPU_HPP

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "curve.cuh"
#include "parallel.hpp"

namespace cuzk {

static const int kScalarBits = 254;

// ---------------------------------------------------------------------------
// scalar handling
// ---------------------------------------------------------------------------
inline bool geq_r(const uint64_t* s) {
    const uint64_t r[4] = {FrParams::P0, FrParams::P1, FrParams::P2, FrParams::P3};
    for (int i = 3; i >= 0; --i) {
        if (s[i] != r[i]) return s[i] > r[i];
    }
    return true;
}

inline void reduce_scalar(const uint64_t* in, uint64_t* out) {
    out[0] = in[0]; out[1] = in[1]; out[2] = in[2]; out[3] = in[3];
    const uint64_t r[4] = {FrParams::P0, FrParams::P1, FrParams::P2, FrParams::P3};
    while (geq_r(out)) {
        uint64_t b = 0;
        for (int i = 0; i < 4; ++i) b = sub_borrow(out[i], r[i], b, &out[i]);
    }
}

inline uint64_t extract_bits(const uint64_t* s, int pos, int len) {
    int limb = pos >> 6, off = pos & 63;
    if (limb >= 4) return 0;
    uint64_t v = s[limb] >> off;
    if (off + len > 64 && limb + 1 < 4) v |= s[limb + 1] << (64 - off);
    return v & ((len >= 64) ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1));
}

struct MsmPlan {
    int c;        // window bits
    int windows;  // number of windows
    int chunks;   // point ranges per window
    int batch;    // batch-affine batch size (0 = XYZZ only)
};

inline int msm_num_windows(int c) { return kScalarBits / c + 1; }

// Pick the window size from a simple cost model (field multiplications):
// accumulation ~ 6.5 per (point, window), reduction ~ 24 per bucket, plus
// the imbalance of splitting units over threads.
inline MsmPlan msm_plan(uint64_t n, int threads, int mul_weight_affine) {
    MsmPlan best = {1, msm_num_windows(1), 1, 0};
    double best_cost = 1e300;
    for (int c = 1; c <= 20; ++c) {
        int W = msm_num_windows(c);
        double nb = (double)((uint64_t)1 << (c - 1));
        for (int chunks = 1; chunks <= 64; chunks *= 2) {
            if ((uint64_t)chunks > std::max<uint64_t>(1, n / 4096)) break;
            int units = W * chunks;
            double per_unit = (double)n / chunks * mul_weight_affine / 10.0 + nb * 24.0 + 500.0;
            int rounds = (units + threads - 1) / threads;
            double cost = rounds * per_unit + (double)W * c * 12.0 * chunks;
            if (cost < best_cost) {
                best_cost = cost;
                best.c = c;
                best.windows = W;
                best.chunks = chunks;
            }
        }
    }
    return best;
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

    // bases: n affine points; scalars: n x 4 limbs standard form.
    static XYZZ run(const Affine* bases, const uint64_t* scalars, uint64_t n, int threads) {
        threads = resolve_threads(threads);
        if (n == 0) return XYZZ::infinity();
        // Batch-affine only pays off when there are enough points per bucket set.
        MsmPlan plan = msm_plan(n, threads, n >= 512 ? 65 : 100);
        const int c = plan.c, W = plan.windows, K = plan.chunks;
        const uint64_t nb = (uint64_t)1 << (c - 1);
        if (n >= 512) {
            uint64_t per = n / (uint64_t)K;
            uint64_t b = std::min<uint64_t>(nb / 4, 2048);
            b = std::min<uint64_t>(b, per / 2);
            plan.batch = (int)std::max<uint64_t>(b, 16);
            if (nb < 64) plan.batch = 0;
        } else {
            plan.batch = 0;
        }

        // 1. signed-digit recoding, layout digits[w * n + i]
        //    code = (|d| << 1) | (d < 0), 0 = skip
        std::vector<uint32_t> digits((size_t)W * (size_t)n);
        parallel_for(n, threads, [&](uint64_t b, uint64_t e) {
            const uint64_t half = (uint64_t)1 << (c - 1);
            const uint64_t full = (uint64_t)1 << c;
            for (uint64_t i = b; i < e; ++i) {
                uint64_t s[4];
                bool skip = bases[i].is_inf();
                reduce_scalar(scalars + 4 * i, s);
                if ((s[0] | s[1] | s[2] | s[3]) == 0) skip = true;
                uint64_t carry = 0;
                for (int w = 0; w < W; ++w) {
                    uint32_t code = 0;
                    if (!skip) {
                        uint64_t raw = extract_bits(s, w * c, c) + carry;
                        if (raw > half) {
                            code = (uint32_t)(((full - raw) << 1) | 1);
                            carry = 1;
                        } else {
                            code = (uint32_t)(raw << 1);
                            carry = 0;
                        }
                        if ((code >> 1) == 0) code = 0;
                    }
                    digits[(size_t)w * n + i] = code;
                }
            }
        });

        // 2. bucket accumulation + reduction per unit
        const int units = W * K;
        std::vector<XYZZ> partial((size_t)units, XYZZ::infinity());
        std::atomic<int> next(0);
        int nthreads = std::min(threads, units);
        run_threads(nthreads, [&](int) {
            Worker wk(nb, plan.batch);
            for (;;) {
                int u = next.fetch_add(1);
                if (u >= units) break;
                int w = u / K, k = u % K;
                uint64_t b = n * (uint64_t)k / (uint64_t)K;
                uint64_t e = n * (uint64_t)(k + 1) / (uint64_t)K;
                partial[(size_t)u] = wk.unit(bases, digits.data() + (size_t)w * n, b, e);
            }
        });

        // 3. combine windows: sum_w 2^(c*w) * S_w
        XYZZ acc = XYZZ::infinity();
        for (int w = W - 1; w >= 0; --w) {
            if (w != W - 1)
                for (int i = 0; i < c; ++i) acc = C::xyzz_dbl(acc);
            for (int k = 0; k < K; ++k) acc = C::xyzz_add(acc, partial[(size_t)w * K + k]);
        }
        return acc;
    }

  private:
    struct Worker {
        uint64_t nb;
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

        Worker(uint64_t nb_, int batch_) : nb(nb_), batch(batch_) {
            abk.resize(nb);
            xbk.resize(nb);
            xstamp.assign(nb, 0);
            bstamp.assign(nb, 0);
            if (batch > 0) {
                op_bucket.resize((size_t)batch);
                op_point.resize((size_t)batch);
                op_den.resize((size_t)batch);
                op_acc.resize((size_t)batch);
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

        void flush() {
            const int m = op_count;
            if (m == 0) return;
            F acc = F::one();
            for (int k = 0; k < m; ++k) {
                op_acc[(size_t)k] = acc;
                acc = F::mul(acc, op_den[(size_t)k]);
            }
            F inv = F::inv(acc);
            for (int k = m - 1; k >= 0; --k) {
                const size_t kk = (size_t)k;
                F dinv = F::mul(op_acc[kk], inv);
                inv = F::mul(inv, op_den[kk]);
                Affine& B = abk[op_bucket[kk]];
                const Affine& P = op_point[kk];
                F lambda;
                if (F::eq(P.x, B.x)) {  // doubling: lambda = 3x^2 / 2y
                    F x2 = F::sqr(B.x);
                    lambda = F::mul(F::add(F::dbl(x2), x2), dinv);
                } else {
                    lambda = F::mul(F::sub(P.y, B.y), dinv);
                }
                F x3 = F::sub(F::sub(F::sqr(lambda), B.x), P.x);
                F y3 = F::sub(F::mul(lambda, F::sub(B.x, x3)), B.y);
                B.x = x3;
                B.y = y3;
            }
            op_count = 0;
            ++batch_id;
        }

        inline void add_affine(uint64_t b, const Affine& p) {
            Affine& B = abk[b];
            if (bstamp[b] == batch_id) {  // already pending in this batch
                add_xyzz(b, p);
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
            if (op_count == batch) flush();
        }

        XYZZ unit(const Affine* bases, const uint32_t* dig, uint64_t begin, uint64_t end) {
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
            if (use_affine) std::memset((void*)abk.data(), 0, sizeof(Affine) * nb);
            const uint64_t PF = 8;
            for (uint64_t i = begin; i < end; ++i) {
                if (i + PF < end) {
                    uint32_t cpf = dig[i + PF];
                    if (cpf) {
                        uint64_t bpf = (cpf >> 1) - 1;
                        if (use_affine) __builtin_prefetch(&abk[bpf], 1, 1);
                        else __builtin_prefetch(&xbk[bpf], 1, 1);
                        __builtin_prefetch(&bases[i + PF], 0, 0);
                    }
                }
                uint32_t code = dig[i];
                if (!code) continue;
                uint64_t b = (code >> 1) - 1;
                Affine p = bases[i];
                if (code & 1) p.y = F::neg(p.y);
                if (use_affine) add_affine(b, p);
                else add_xyzz(b, p);
            }
            if (use_affine) flush();
            // running-sum reduction
            XYZZ running = XYZZ::infinity(), sum = XYZZ::infinity();
            for (uint64_t j = nb; j-- > 0;) {
                if (use_affine && !abk[j].is_inf()) running = C::xyzz_add_mixed(running, abk[j]);
                if (xstamp[j] == unit_id) running = C::xyzz_add(running, xbk[j]);
                sum = C::xyzz_add(sum, running);
            }
            return sum;
        }
    };
};

}  // namespace cuzk

#endif  // CUZK_MSM_CPU_HPP
