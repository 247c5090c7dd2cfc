// G1 multi-scalar multiplication (Pippenger) on the GPU, the device twin of
// cuzk/msm_cpu.hpp.
//
// Pipeline (driven by cuzk_tasks/groth16/backends/gpu.py):
//   1. msm_digits       one thread per scalar: reduce mod r, signed c-bit
//                       recoding (digits in [-2^(c-1), 2^(c-1)], W = bits(r)/c + 1
//                       windows, same recoding as the CPU core), key =
//                       window * nb + |digit| - 1, value = index << 1 | sign;
//                       zero digits and points at infinity get no key.  The
//                       per-bucket histogram is taken here (atomics).
//   2. counting sort    exclusive scan of the histogram (on the host side with
//                       cupy.cumsum), then msm_scatter places every value in
//                       its bucket's range.  Order inside a bucket does not
//                       matter (the group is commutative).
//   3. accumulation     msm_accumulate_points: every bucket is cut into
//                       tasks of at most T points, one thread per task, XYZZ
//                       mixed additions; msm_accumulate_partials then sums
//                       the partial results T at a time, level after level,
//                       until each bucket holds one point (so a bucket with
//                       millions of entries -- e.g. witnesses full of ones --
//                       costs log_T(count) rounds, not one long chain).
//   4. msm_bucket_reduce  each window's buckets are cut into segments; a
//                       thread does the running-sum trick over its segment
//                       and adds lo * running for the segment offset lo.
//                       The segment sums are summed per window with
//                       msm_accumulate_partials again.
//   5. msm_final        one thread: sum_w 2^(c w) S_w, returned as Jacobian
//                       X, Y, Z (Montgomery) like the CPU core.
#include "gpu_common.cuh"

using namespace cuzk::gpu;

typedef G1::Affine Aff;
typedef G1::XYZZ Xyzz;
typedef G1::Jacobian Jac;

#define CUZK_NO_KEY 0xffffffffu

static constexpr int L = Fq::N;  // limbs of a base-field element (4 BN254, 6 BLS12-381)

__device__ __forceinline__ Xyzz load_xyzz(const u64* p, u64 i) {
    const u64* q = p + 4 * L * i;
    Xyzz r;
    r.X = Fq::from_raw(q);
    r.Y = Fq::from_raw(q + L);
    r.ZZ = Fq::from_raw(q + 2 * L);
    r.ZZZ = Fq::from_raw(q + 3 * L);
    return r;
}

__device__ __forceinline__ void store_xyzz(u64* p, u64 i, const Xyzz& a) {
    u64* q = p + 4 * L * i;
    a.X.to_raw(q);
    a.Y.to_raw(q + L);
    a.ZZ.to_raw(q + 2 * L);
    a.ZZZ.to_raw(q + 3 * L);
}

__device__ __forceinline__ bool scalar_geq_r(const u64* s) { return !Fr::is_canonical(s); }

__device__ __forceinline__ u64 scalar_bits(const u64* s, u32 pos, u32 len) {
    const u32 limb = pos >> 6, off = pos & 63;
    if (limb >= 4) return 0;
    u64 v = s[limb] >> off;
    if (off + len > 64 && limb + 1 < 4) v |= s[limb + 1] << (64 - off);
    return v & (((u64)1 << len) - 1);
}

// Largest b < nseg with off[b] <= o (off nondecreasing, off[0] = 0 <= o).
__device__ __forceinline__ u32 find_segment(const u32* off, u32 nseg, u32 o) {
    u32 lo = 0, hi = nseg;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (off[mid] <= o) lo = mid;
        else hi = mid;
    }
    return lo;
}

// k * p for a small k (plain integer), double-and-add.
// Task o of a segmented list: segment b = the one whose output range [off_out[b],
// off_out[b+1]) holds o; its entries [start, stop) are the (o - off_out[b])-th run of at
// most T entries of [off_in[b], off_in[b+1]).
__device__ __forceinline__ void task_range(const u32* off_in, const u32* off_out, u32 nseg,
                                           u32 o, u32 T, u32* start, u32* stop) {
    const u32 b = find_segment(off_out, nseg, o);
    *start = off_in[b] + (o - off_out[b]) * T;
    *stop = *start + T < off_in[b + 1] ? *start + T : off_in[b + 1];
}

__device__ Xyzz xyzz_mul_small(const Xyzz& p, u32 k) {
    Xyzz acc = Xyzz::infinity();
    for (int bit = 31; bit >= 0; --bit) {
        acc = G1::xyzz_dbl(acc);
        if ((k >> bit) & 1) acc = G1::xyzz_add(acc, p);
    }
    return acc;
}

// 1. digits + histogram.  keys/vals: W x n (window-major).  counts: W * nb.
extern "C" __global__ void msm_digits(const u64* __restrict__ scalars, const u64* __restrict__ bases,
                                      u32 n, u32 c, u32 W, u32 nb, u32* __restrict__ keys,
                                      u32* __restrict__ vals, u32* __restrict__ counts) {
    const u64 i = global_tid();
    if (i >= n) return;
    const u64* b = bases + 2 * L * i;
    u64 any = 0;
#pragma unroll
    for (int l = 0; l < 2 * L; ++l) any |= b[l];
    const bool inf = any == 0;
    u64 s[4] = {scalars[4 * i], scalars[4 * i + 1], scalars[4 * i + 2], scalars[4 * i + 3]};
    const Fr r = Fr::modulus_limbs();
    while (scalar_geq_r(s)) {  // values >= r are allowed (reduced), at most 5 rounds
        u64 br = 0;
        for (int l = 0; l < 4; ++l) br = sub_borrow(s[l], r.v[l], br, &s[l]);
    }
    const u64 half = (u64)1 << (c - 1), full = (u64)1 << c;
    u64 carry = 0;
    for (u32 w = 0; w < W; ++w) {
        const u64 raw = scalar_bits(s, w * c, c) + carry;
        u64 mag;
        u32 neg;
        if (raw > half) {
            mag = full - raw;
            neg = 1;
            carry = 1;
        } else {
            mag = raw;
            neg = 0;
            carry = 0;
        }
        u32 key = CUZK_NO_KEY, val = 0;
        if (mag != 0 && !inf) {
            key = w * nb + (u32)(mag - 1);
            val = ((u32)i << 1) | neg;
            atomicAdd(&counts[key], 1u);
        }
        keys[(u64)w * n + i] = key;
        vals[(u64)w * n + i] = val;
    }
}

// 2. counting-sort scatter: cursor starts as the exclusive scan of counts.
extern "C" __global__ void msm_scatter(const u32* __restrict__ keys, const u32* __restrict__ vals,
                                       u64 total, u32* __restrict__ cursor,
                                       u32* __restrict__ sorted) {
    const u64 t = global_tid();
    if (t >= total) return;
    const u32 k = keys[t];
    if (k == CUZK_NO_KEY) return;
    const u32 p = atomicAdd(&cursor[k], 1u);
    sorted[p] = vals[t];
}

// 3a. bucket b's sorted entries [off_in[b], off_in[b+1]) are cut into tasks of
// at most T entries; task o (o < total_out) writes one XYZZ partial.
extern "C" __global__ void msm_accumulate_points(const u64* __restrict__ bases,
                                                 const u32* __restrict__ sorted,
                                                 const u32* __restrict__ off_in,
                                                 const u32* __restrict__ off_out, u32 nseg,
                                                 u32 total_out, u32 T, u64* __restrict__ out) {
    const u64 o = global_tid();
    if (o >= total_out) return;
    u32 start, stop;
    task_range(off_in, off_out, nseg, (u32)o, T, &start, &stop);
    Xyzz acc = Xyzz::infinity();
    for (u32 p = start; p < stop; ++p) {
        const u32 v = sorted[p];
        const u64* q = bases + 2 * L * (u64)(v >> 1);
        Aff P;
        P.x = Fq::from_raw(q);
        P.y = Fq::from_raw(q + L);
        if (v & 1) P.y = Fq::neg(P.y);
        acc = G1::xyzz_add_mixed(acc, P);
    }
    store_xyzz(out, o, acc);
}

// 3b. the same over XYZZ partials: segment b's partials [off_in[b], off_in[b+1]).
extern "C" __global__ void msm_accumulate_partials(const u64* __restrict__ in,
                                                   const u32* __restrict__ off_in,
                                                   const u32* __restrict__ off_out, u32 nseg,
                                                   u32 total_out, u32 T, u64* __restrict__ out) {
    const u64 o = global_tid();
    if (o >= total_out) return;
    u32 start, stop;
    task_range(off_in, off_out, nseg, (u32)o, T, &start, &stop);
    Xyzz acc = Xyzz::infinity();
    for (u32 p = start; p < stop; ++p) acc = G1::xyzz_add(acc, load_xyzz(in, p));
    store_xyzz(out, o, acc);
}

// 4. running-sum reduction.  Bucket j of window w (weight j + 1) holds
// parts[off[w*nb + j]] if off[w*nb + j + 1] > off[w*nb + j], else nothing.
// Thread (w, s) handles buckets [s*seg_len, min((s+1)*seg_len, nb)).
extern "C" __global__ void msm_bucket_reduce(const u64* __restrict__ parts,
                                             const u32* __restrict__ off, u32 W, u32 nb,
                                             u32 seg_len, u32 S, u64* __restrict__ out) {
    const u64 t = global_tid();
    if (t >= (u64)W * S) return;
    const u32 w = (u32)(t / S), s = (u32)(t % S);
    const u32 lo = s * seg_len;
    const u32 hi = lo + seg_len < nb ? lo + seg_len : nb;
    Xyzz running = Xyzz::infinity(), sum = Xyzz::infinity();
    for (u32 j = hi; j-- > lo;) {
        const u32 b = w * nb + j;
        if (off[b + 1] > off[b]) running = G1::xyzz_add(running, load_xyzz(parts, off[b]));
        sum = G1::xyzz_add(sum, running);
    }
    if (lo) sum = G1::xyzz_add(sum, xyzz_mul_small(running, lo));
    store_xyzz(out, t, sum);
}

// 5. sum_w 2^(c w) S_w, S_w = parts[off[w]] if present.  out: Jacobian X, Y, Z.
extern "C" __global__ void msm_final(const u64* __restrict__ parts, const u32* __restrict__ off,
                                     u32 W, u32 c, u64* __restrict__ out) {
    if (global_tid() != 0) return;
    Xyzz acc = Xyzz::infinity();
    for (int w = (int)W - 1; w >= 0; --w) {
        if (w != (int)W - 1)
            for (u32 i = 0; i < c; ++i) acc = G1::xyzz_dbl(acc);
        if (off[w + 1] > off[w]) acc = G1::xyzz_add(acc, load_xyzz(parts, off[w]));
    }
    const Jac j = G1::xyzz_to_jacobian(acc);
    j.X.to_raw(out);
    j.Y.to_raw(out + L);
    j.Z.to_raw(out + 2 * L);
}
