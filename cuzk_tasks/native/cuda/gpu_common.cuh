// Device-side helpers shared by the CUDA kernel files (ntt.cu, qap.cu, msm.cu).
//
// Only glue lives here: the field and curve arithmetic is the SAME code the
// CPU core uses (cuzk/field.cuh, cuzk/curve.cuh with cuzk/bn254.cuh and
// cuzk/bls12_381.cuh).  Compiled by NVRTC (CuPy RawModule) and by nvcc; no
// system headers.
//
// The curve is chosen at compile time: -DCUZK_GPU_CURVE=BLS12_381 (a curve
// bundle of curve.cuh; default BN254), so every kernel file is compiled once
// per curve from the same source (gpu.nvrtc_options(curve=...)).  Kernels use
// cuzk::gpu's Fq, Fr, G1, G2, never cuzk's BN254 aliases.
#ifndef CUZK_CUDA_GPU_COMMON_CUH
#define CUZK_CUDA_GPU_COMMON_CUH

#include "cuzk/compat.cuh"
#include "cuzk/bn254.cuh"
#include "cuzk/bls12_381.cuh"
#include "cuzk/curve.cuh"

#ifndef CUZK_GPU_CURVE
#define CUZK_GPU_CURVE BN254
#endif

namespace cuzk {
namespace gpu {

typedef ::cuzk::CUZK_GPU_CURVE Curve;
typedef Curve::Fq Fq;
typedef Curve::Fr Fr;
typedef Curve::Fq2 Fq2;
typedef Curve::G1 G1;
typedef Curve::G2 G2;
using ::cuzk::add_carry;
using ::cuzk::sub_borrow;
static_assert(Fr::N == 4, "the NTT/QAP kernels and the MSM scalars index Fr as 4 limbs");

typedef uint64_t u64;  // same type as the shared headers use (unsigned long under nvcc)
typedef uint32_t u32;

// Shared-memory NTT tile: 2^10 Fr elements (32 KiB), one butterfly per thread.
#define CUZK_NTT_TILE_LOG 10
#define CUZK_NTT_TILE (1u << CUZK_NTT_TILE_LOG)

__device__ __forceinline__ u64 global_tid() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}

__device__ __forceinline__ Fr load_fr(const u64* p, u64 i) {
    Fr r;
    const u64* q = p + 4 * i;
    r.v[0] = q[0]; r.v[1] = q[1]; r.v[2] = q[2]; r.v[3] = q[3];
    return r;
}

__device__ __forceinline__ void store_fr(u64* p, u64 i, const Fr& x) {
    u64* q = p + 4 * i;
    q[0] = x.v[0]; q[1] = x.v[1]; q[2] = x.v[2]; q[3] = x.v[3];
}

// bit-reversal of the low `bits` bits of x (bits in 1..64; 0 -> 0)
__device__ __forceinline__ u64 bit_reverse(u64 x, u32 bits) {
    return bits ? (__brevll(x) >> (64 - bits)) : 0;
}

// a^e for a 64-bit exponent e.
__device__ __forceinline__ Fr fr_pow_u64(const Fr& a, u64 e) {
    Fr r = Fr::one();
    Fr b = a;
    while (e) {
        if (e & 1) r = Fr::mul(r, b);
        b = Fr::sqr(b);
        e >>= 1;
    }
    return r;
}

// ---------------------------------------------------------------------------
// NTT building blocks on a shared-memory tile (blockDim.x == tile / 2).
// The tile of this block: 2^stages elements of transform blockIdx.y, tile blockIdx.x.
// ---------------------------------------------------------------------------

__device__ __forceinline__ u64* tile_base(u64* x, u32 log_n, u32 stages) {
    const u64 n = (u64)1 << log_n;
    return x + 4 * ((u64)blockIdx.y * n + ((u64)blockIdx.x << stages));
}

// Each thread loads elements t and t + tile/2 of the tile, then the block syncs.
__device__ __forceinline__ void tile_load(Fr* sh, const u64* base, u32 stages) {
    const u32 t = threadIdx.x, half = 1u << (stages - 1);
    sh[t] = load_fr(base, t);
    sh[t + half] = load_fr(base, t + half);
    __syncthreads();
}

__device__ __forceinline__ void tile_store(u64* base, const Fr* sh, u32 stages) {
    const u32 t = threadIdx.x, half = 1u << (stages - 1);
    store_fr(base, t, sh[t]);
    store_fr(base, t + half, sh[t + half]);
}

// ---------------------------------------------------------------------------
// Butterfly stages on the tile.
// tw: w^k for k < n/2 (Montgomery), w a primitive 2^log_n-th root of unity.
// ---------------------------------------------------------------------------

// Cooley-Tukey (DIT) stages 1..stages: bit-reversed input -> natural order
// within the tile's sub-transforms.
__device__ __forceinline__ void tile_dit(Fr* sh, u32 stages, u32 log_n, const u64* tw) {
    const u32 t = threadIdx.x;
    for (u32 s = 1; s <= stages; ++s) {
        const u32 half = 1u << (s - 1);
        const u32 j = t & (half - 1);
        const u32 i0 = ((t >> (s - 1)) << s) + j;
        const u64 stride = (u64)1 << (log_n - s);
        Fr u = sh[i0];
        Fr v = Fr::mul(sh[i0 + half], load_fr(tw, (u64)j * stride));
        sh[i0] = Fr::add(u, v);
        sh[i0 + half] = Fr::sub(u, v);
        __syncthreads();
    }
}

// Gentleman-Sande (DIF) stages stages..1: natural order -> bit-reversed.
__device__ __forceinline__ void tile_dif(Fr* sh, u32 stages, u32 log_n, const u64* tw) {
    const u32 t = threadIdx.x;
    for (u32 s = stages; s >= 1; --s) {
        const u32 half = 1u << (s - 1);
        const u32 j = t & (half - 1);
        const u32 i0 = ((t >> (s - 1)) << s) + j;
        const u64 stride = (u64)1 << (log_n - s);
        Fr u = sh[i0];
        Fr v = sh[i0 + half];
        sh[i0] = Fr::add(u, v);
        sh[i0 + half] = Fr::mul(Fr::sub(u, v), load_fr(tw, (u64)j * stride));
        __syncthreads();
    }
}

}  // namespace gpu
}  // namespace cuzk

#endif  // CUZK_CUDA_GPU_COMMON_CUH
