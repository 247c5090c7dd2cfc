// Batched radix-2 NTT kernels over BN254 Fr (Montgomery form).
//
// Layout: `batch` transforms of n = 2^log_n elements each, stored back to back
// (element i of transform k at x + 4*(k*n + i)); blockIdx.y selects the
// transform.  Twiddle tables (w^k, k < n/2) are built once per domain size by
// fr_geometric and stay on the device.
//
//   forward/inverse natural -> natural:  ntt_bitrev_copy, ntt_tile_dit
//       (stages 1..min(10, log_n) in shared memory), ntt_stage (remaining
//       stages, one launch each), fr_scale (1/n for the inverse).
//   DIF (natural -> bit-reversed) for the QAP step: ntt_stage(dif=1) for the
//       large stages, then qap.cu's tile kernel fuses the coset twist.
#include "gpu_common.cuh"

using namespace cuzk::gpu;

// out[bitrev(i)] = in[i]  (out-of-place; batched)
extern "C" __global__ void ntt_bitrev_copy(const u64* __restrict__ in, u64* __restrict__ out,
                                           u32 log_n) {
    const u64 n = (u64)1 << log_n;
    const u64 i = global_tid();
    if (i >= n) return;
    const u64 off = (u64)blockIdx.y * n;
    store_fr(out + 4 * off, bit_reverse(i, log_n), load_fr(in + 4 * off, i));
}

// DIT stages 1..stages on tiles of 2^stages elements (blockDim.x = 2^(stages-1)).
extern "C" __global__ void ntt_tile_dit(u64* __restrict__ x, u32 log_n, u32 stages,
                                        const u64* __restrict__ tw) {
    __shared__ Fr sh[CUZK_NTT_TILE];
    u64* base = tile_base(x, log_n, stages);
    tile_load(sh, base, stages);
    tile_dit(sh, stages, log_n, tw);
    tile_store(base, sh, stages);
}

// DIF stages stages..1 on tiles of 2^stages elements, no twist.
extern "C" __global__ void ntt_tile_dif(u64* __restrict__ x, u32 log_n, u32 stages,
                                        const u64* __restrict__ tw) {
    __shared__ Fr sh[CUZK_NTT_TILE];
    u64* base = tile_base(x, log_n, stages);
    tile_load(sh, base, stages);
    tile_dif(sh, stages, log_n, tw);
    tile_store(base, sh, stages);
}

// One radix-2 stage s (butterfly span 2^s) over the whole array; n/2 threads
// per transform.  dif = 0: Cooley-Tukey, dif = 1: Gentleman-Sande.
extern "C" __global__ void ntt_stage(u64* __restrict__ x, u32 log_n, u32 s,
                                     const u64* __restrict__ tw, int dif) {
    const u64 n = (u64)1 << log_n;
    const u64 t = global_tid();
    if (t >= n / 2) return;
    u64* a = x + 4 * ((u64)blockIdx.y * n);
    const u64 half = (u64)1 << (s - 1);
    const u64 j = t & (half - 1);
    const u64 i0 = ((t >> (s - 1)) << s) + j;
    const Fr w = load_fr(tw, j << (log_n - s));
    Fr u = load_fr(a, i0);
    Fr v = load_fr(a, i0 + half);
    if (dif) {
        store_fr(a, i0, Fr::add(u, v));
        store_fr(a, i0 + half, Fr::mul(Fr::sub(u, v), w));
    } else {
        v = Fr::mul(v, w);
        store_fr(a, i0, Fr::add(u, v));
        store_fr(a, i0 + half, Fr::sub(u, v));
    }
}

// x[i] *= s[0] for i < count
extern "C" __global__ void fr_scale(u64* __restrict__ x, u64 count, const u64* __restrict__ s) {
    const u64 i = global_tid();
    if (i >= count) return;
    store_fr(x, i, Fr::mul(load_fr(x, i), load_fr(s, 0)));
}

// out[i] = start * step^i for i < n; each thread fills `chunk` consecutive entries.
extern "C" __global__ void fr_geometric(u64* __restrict__ out, u64 n, const u64* __restrict__ start,
                                        const u64* __restrict__ step, u32 chunk) {
    const u64 t = global_tid();
    const u64 lo = t * chunk;
    if (lo >= n) return;
    const u64 hi = lo + chunk < n ? lo + chunk : n;
    const Fr st = load_fr(step, 0);
    Fr cur = Fr::mul(load_fr(start, 0), fr_pow_u64(st, lo));
    for (u64 i = lo; i < hi; ++i) {
        store_fr(out, i, cur);
        cur = Fr::mul(cur, st);
    }
}

// Montgomery <-> standard conversions (in place).
extern "C" __global__ void fr_to_mont(u64* __restrict__ x, u64 count) {
    const u64 i = global_tid();
    if (i >= count) return;
    store_fr(x, i, Fr::from_standard(x + 4 * i));
}

extern "C" __global__ void fr_from_mont(u64* __restrict__ x, u64 count) {
    const u64 i = global_tid();
    if (i >= count) return;
    store_fr(x, i, load_fr(x, i).standard());
}
