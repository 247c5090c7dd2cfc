// QAP step of the Groth16 prover on the GPU (snarkjs-compatible), the device
// twin of cuzk/qap_cpu.hpp:
//
//   qap_evaluate_abc  A*w, B*w at every constraint from the zkey section-4
//                     coefficients (sorted into CSR rows on the host once per
//                     circuit), and C = A o B, in one pass;
//   compute_h         the three inverse NTTs run as one batched DIF pass
//                     (ntt.cu's ntt_stage for the large stages), whose final
//                     shared-memory tile (qap_coset_dif_tile) fuses the coset
//                     twist g^i / n; the three forward NTTs run as one batched
//                     DIT pass whose last stage (qap_h_last_stage) fuses
//                     h = A'B' - C' and the conversion to standard form.
//
// Because the DIF output is bit-reversed and the DIT input must be
// bit-reversed, no permutation pass is needed at all.
#include "gpu_common.cuh"

using namespace cuzk::gpu;

// One thread per constraint i < domain.  Rows [0, domain) are matrix A,
// rows [domain, 2 domain) matrix B; row r's terms are sig/val[row_off[r]..row_off[r+1]).
// val: coef * R^2 mod r as stored in the zkey (so val * w_standard is the
// Montgomery form of coef * w).  abc: 3 x domain elements (A, B, C), Montgomery.
extern "C" __global__ void qap_evaluate_abc(const u32* __restrict__ row_off,
                                            const u32* __restrict__ sig,
                                            const u64* __restrict__ val,
                                            const u64* __restrict__ w, u32 domain,
                                            u64* __restrict__ abc) {
    const u64 i = global_tid();
    if (i >= domain) return;
    Fr acc[2];
    for (int m = 0; m < 2; ++m) {
        const u64 row = (u64)m * domain + i;
        Fr s = Fr::zero();
        for (u32 k = row_off[row]; k < row_off[row + 1]; ++k)
            s = Fr::add(s, Fr::mul(load_fr(val, k), load_fr(w, sig[k])));
        acc[m] = s;
    }
    store_fr(abc, i, acc[0]);
    store_fr(abc, (u64)domain + i, acc[1]);
    store_fr(abc, 2 * (u64)domain + i, Fr::mul(acc[0], acc[1]));
}

// c[i] = a[i] * b[i]
extern "C" __global__ void qap_mul(const u64* __restrict__ a, const u64* __restrict__ b,
                                   u64* __restrict__ c, u64 count) {
    const u64 i = global_tid();
    if (i >= count) return;
    store_fr(c, i, Fr::mul(load_fr(a, i), load_fr(b, i)));
}

// Last DIF stages (stages..1, tile of 2^stages) of the batched inverse NTT,
// then the coset twist: position p holds coefficient bitrev(p), which is
// multiplied by shift[bitrev(p)] = g^bitrev(p) / n.
extern "C" __global__ void qap_coset_dif_tile(u64* __restrict__ x, u32 log_n, u32 stages,
                                              const u64* __restrict__ tw_inv,
                                              const u64* __restrict__ shift) {
    __shared__ Fr sh[CUZK_NTT_TILE];
    const u32 tile = 1u << stages;
    const u32 t = threadIdx.x;
    const u64 first = (u64)blockIdx.x * tile;
    u64* base = tile_base(x, log_n, stages);
    tile_load(sh, base, stages);
    tile_dif(sh, stages, log_n, tw_inv);
    for (u32 k = 0; k < 2; ++k) {
        const u32 p = t + k * (tile / 2);
        const Fr f = load_fr(shift, bit_reverse(first + p, log_n));
        store_fr(base, p, Fr::mul(sh[p], f));
    }
}

// Last DIT stage (span n) of the batched forward NTT on the three coset
// transforms A', B', C', fused with h = A'B' - C' (STANDARD form out).
extern "C" __global__ void qap_h_last_stage(const u64* __restrict__ x, u32 log_n,
                                            const u64* __restrict__ tw, u64* __restrict__ h) {
    const u64 n = (u64)1 << log_n;
    const u64 half = n / 2;
    const u64 j = global_tid();
    if (j >= half) return;
    const Fr w = load_fr(tw, j);
    Fr lo[3], hi[3];
    for (int k = 0; k < 3; ++k) {
        const u64* a = x + 4 * ((u64)k * n);
        Fr u = load_fr(a, j);
        Fr v = Fr::mul(load_fr(a, j + half), w);
        lo[k] = Fr::add(u, v);
        hi[k] = Fr::sub(u, v);
    }
    store_fr(h, j, Fr::sub(Fr::mul(lo[0], lo[1]), lo[2]).standard());
    store_fr(h, j + half, Fr::sub(Fr::mul(hi[0], hi[1]), hi[2]).standard());
}
