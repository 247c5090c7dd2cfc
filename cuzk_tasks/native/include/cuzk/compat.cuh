// Portability layer shared by the host C++ core and the CUDA kernels.
//
// This header (and field.cuh / bn254.cuh / curve.cuh) must stay free of any
// host-only header and of the C++ standard library so that nvcc and NVRTC can
// compile it verbatim.
#ifndef CUZK_COMPAT_CUH
#define CUZK_COMPAT_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CUZK_DEVICE_COMPILER 1
#define CUZK_HD __host__ __device__
#define CUZK_INLINE __forceinline__
#else
#define CUZK_HD
#if defined(__GNUC__) || defined(__clang__)
#define CUZK_INLINE inline __attribute__((always_inline))
#else
#define CUZK_INLINE inline
#endif
#endif

// Full unrolling of the limb loops (constant trip counts), so that limb indices
// are compile-time constants on both compilers.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CUZK_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define CUZK_UNROLL _Pragma("GCC unroll 16")
#elif defined(__clang__)
#define CUZK_UNROLL _Pragma("unroll")
#else
#define CUZK_UNROLL
#endif

#if defined(__CUDACC_RTC__)
// NVRTC has no <stdint.h>; provide the fixed-width types ourselves.
typedef unsigned long long uint64_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef int int32_t;
typedef unsigned char uint8_t;
#else
#include <stdint.h>
#endif

// Host x86-64: use the carry intrinsics (GCC/clang emit clean adc/sbb chains
// for them, unlike for unsigned __int128 additions).
#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define CUZK_HOST_X86 1
#include <immintrin.h>
#endif

namespace cuzk {

// 64x64 -> 128 bit multiply: returns the low half, stores the high half.
CUZK_HD CUZK_INLINE uint64_t mul_wide(uint64_t a, uint64_t b, uint64_t* hi) {
#if defined(__CUDA_ARCH__)
    *hi = __umul64hi(a, b);
    return a * b;
#else
    unsigned __int128 p = (unsigned __int128)a * b;
    *hi = (uint64_t)(p >> 64);
    return (uint64_t)p;
#endif
}

// r = a + b + carry_in; returns carry out (0/1).  carry_in must be 0 or 1.
CUZK_HD CUZK_INLINE uint64_t add_carry(uint64_t a, uint64_t b, uint64_t carry_in, uint64_t* r) {
#if defined(__CUDA_ARCH__)
    uint64_t s = a + b;
    uint64_t c1 = s < a;
    uint64_t t = s + carry_in;
    uint64_t c2 = t < s;
    *r = t;
    return c1 | c2;
#elif defined(CUZK_HOST_X86)
    unsigned long long o;
    unsigned char c = _addcarry_u64((unsigned char)carry_in, a, b, &o);
    *r = o;
    return c;
#else
    unsigned __int128 s = (unsigned __int128)a + b + carry_in;
    *r = (uint64_t)s;
    return (uint64_t)(s >> 64);
#endif
}

// r = a - b - borrow_in; returns borrow out (0/1).  borrow_in must be 0 or 1.
CUZK_HD CUZK_INLINE uint64_t sub_borrow(uint64_t a, uint64_t b, uint64_t borrow_in, uint64_t* r) {
#if defined(__CUDA_ARCH__)
    uint64_t d = a - b;
    uint64_t b1 = a < b;
    uint64_t t = d - borrow_in;
    uint64_t b2 = d < borrow_in;
    *r = t;
    return b1 | b2;
#elif defined(CUZK_HOST_X86)
    unsigned long long o;
    unsigned char c = _subborrow_u64((unsigned char)borrow_in, a, b, &o);
    *r = o;
    return c;
#else
    unsigned __int128 d = (unsigned __int128)a - b - borrow_in;
    *r = (uint64_t)d;
    return (uint64_t)(d >> 64) & 1;
#endif
}

// (hi, lo) = a * b + c + d  (never overflows 128 bits).
CUZK_HD CUZK_INLINE uint64_t mac(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t* hi) {
#if defined(__CUDA_ARCH__)
    uint64_t h;
    uint64_t l = mul_wide(a, b, &h);
    uint64_t r = l + c;
    h += (r < l);
    uint64_t r2 = r + d;
    h += (r2 < r);
    *hi = h;
    return r2;
#else
    unsigned __int128 p = (unsigned __int128)a * b + c + d;
    *hi = (uint64_t)(p >> 64);
    return (uint64_t)p;
#endif
}

}  // namespace cuzk

#endif  // CUZK_COMPAT_CUH
