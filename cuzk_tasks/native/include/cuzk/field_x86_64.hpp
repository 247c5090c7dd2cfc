// Host-only x86-64 inline-assembly kernels for the 4- and 6-limb Montgomery fields.
//
// Included by field.cuh only for host x86-64 builds (never by nvcc/NVRTC).
// The kernels use MULX/ADCX/ADOX (BMI2 + ADX); they are selected at run time
// when the CPU supports them, so the library still runs on older CPUs (the
// portable C++ code is used there).  The assembler accepts these mnemonics
// regardless of -march, so no special compiler flags are needed.
#ifndef CUZK_FIELD_X86_64_HPP
#define CUZK_FIELD_X86_64_HPP

#include <stdint.h>

namespace cuzk {
namespace x86 {

inline bool detect_adx() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("adx");
}

inline const bool g_has_adx = detect_adx();

// r = a * b * 2^-256 mod p, fully reduced.  m = {p0, p1, p2, p3, -p^-1 mod 2^64}.
// Requires p < 2^254 (no-carry CIOS) and a, b < p.  r may alias a or b.
//
// Register use: t0..t4 rotate through r8..r12, lo/hi hold product halves,
// rdx is the MULX multiplicand, rax is a zero register for flag folding.
// The building blocks of a CIOS row (both limb counts):
//   MAC:      X += lo, Y += hi of SRC * rdx, on the CF (adcx) and OF (adox) chains
//   MUL_LAST: the top limb: E = hi of SRC * rdx plus both chains' carries
#define CUZK_X86_MAC(SRC, X, Y)                     \
    "mulxq " SRC ", %[lo], %[hi]\n\t"               \
    "adcxq %[lo], " X "\n\t"                        \
    "adoxq %[hi], " Y "\n\t"
#define CUZK_X86_MUL_LAST(SRC, D, E)                \
    "mulxq " SRC ", %[lo], " E "\n\t"               \
    "adcxq %[lo], " D "\n\t"                        \
    "adoxq %%rax, " E "\n\t"                        \
    "adcxq %%rax, " E "\n\t"
// t += a * b[OFF/8]
#define CUZK_X86_MUL_ROW(OFF, A, B, C, D, E)        \
    "movq " OFF "(%[b]), %%rdx\n\t"                 \
    "xorl %%eax, %%eax\n\t"                         \
    CUZK_X86_MAC("0(%[a])", A, B)                   \
    CUZK_X86_MAC("8(%[a])", B, C)                   \
    CUZK_X86_MAC("16(%[a])", C, D)                  \
    CUZK_X86_MUL_LAST("24(%[a])", D, E)
// t += (t0 * -p^-1 mod 2^64) * p, which zeroes t0
#define CUZK_X86_RED_ROW(A, B, C, D, E)             \
    "movq " A ", %%rdx\n\t"                         \
    "imulq %[m4], %%rdx\n\t"                        \
    "xorl %%eax, %%eax\n\t"                         \
    CUZK_X86_MAC("%[m0]", A, B)                     \
    CUZK_X86_MAC("%[m1]", B, C)                     \
    CUZK_X86_MAC("%[m2]", C, D)                     \
    CUZK_X86_MAC("%[m3]", D, E)                     \
    "adcxq %%rax, " E "\n\t"

inline __attribute__((always_inline)) void mont_mul_adx(uint64_t* r, const uint64_t* a,
                                                        const uint64_t* b, const uint64_t (&m)[5]) {
    // lo/hi are scratch registers that end up holding result limbs 0/1;
    // early-clobber keeps the a/b pointers out of all four outputs.  The dummy
    // "m" operands tell the compiler which memory the asm reads, so no
    // "memory" clobber is needed.
    uint64_t o0, o1, o2, o3;
    __asm__(
        // row 0: t = a * b0 (t starts at zero)
        "movq 0(%[b]), %%rdx\n\t"
        "xorl %%eax, %%eax\n\t"
        "mulxq 0(%[a]), %%r8, %%r9\n\t"
        "mulxq 8(%[a]), %[lo], %%r10\n\t"
        "adcxq %[lo], %%r9\n\t"
        "mulxq 16(%[a]), %[lo], %%r11\n\t"
        "adcxq %[lo], %%r10\n\t"
        "mulxq 24(%[a]), %[lo], %%r12\n\t"
        "adcxq %[lo], %%r11\n\t"
        "adcxq %%rax, %%r12\n\t"
        CUZK_X86_RED_ROW("%%r8", "%%r9", "%%r10", "%%r11", "%%r12")
        CUZK_X86_MUL_ROW("8", "%%r9", "%%r10", "%%r11", "%%r12", "%%r8")
        CUZK_X86_RED_ROW("%%r9", "%%r10", "%%r11", "%%r12", "%%r8")
        CUZK_X86_MUL_ROW("16", "%%r10", "%%r11", "%%r12", "%%r8", "%%r9")
        CUZK_X86_RED_ROW("%%r10", "%%r11", "%%r12", "%%r8", "%%r9")
        CUZK_X86_MUL_ROW("24", "%%r11", "%%r12", "%%r8", "%%r9", "%%r10")
        CUZK_X86_RED_ROW("%%r11", "%%r12", "%%r8", "%%r9", "%%r10")
        // result (r12, r8, r9, r10) < 2p: conditional subtraction of p
        "movq %%r12, %[lo]\n\t"
        "subq %[m0], %[lo]\n\t"
        "movq %%r8, %[hi]\n\t"
        "sbbq %[m1], %[hi]\n\t"
        "movq %%r9, %[o2]\n\t"
        "sbbq %[m2], %[o2]\n\t"
        "movq %%r10, %[o3]\n\t"
        "sbbq %[m3], %[o3]\n\t"
        "cmovcq %%r12, %[lo]\n\t"
        "cmovcq %%r8, %[hi]\n\t"
        "cmovcq %%r9, %[o2]\n\t"
        "cmovcq %%r10, %[o3]\n\t"
        : [lo] "=&r"(o0), [hi] "=&r"(o1), [o2] "=&r"(o2), [o3] "=&r"(o3)
        : [a] "r"(a), [b] "r"(b), [m0] "m"(m[0]), [m1] "m"(m[1]), [m2] "m"(m[2]),
          [m3] "m"(m[3]), [m4] "m"(m[4]),
          "m"(*(const uint64_t(*)[4])a), "m"(*(const uint64_t(*)[4])b)
        : "rax", "rdx", "r8", "r9", "r10", "r11", "r12", "cc");
    r[0] = o0;
    r[1] = o1;
    r[2] = o2;
    r[3] = o3;
}


// 6-limb twin of mont_mul_adx (BLS12-381 Fq): r = a * b * 2^-384 mod p, fully
// reduced; m = {p0..p5, -p^-1 mod 2^64}; p < 2^383 (no-carry CIOS); r may alias
// a or b (it is written only after a and b are read).  t0..t6 rotate through
// r8..r14; the result is stored through r with a borrow-selected copy.
#define CUZK_X86_MUL_ROW6(OFF, A, B, C, D, E, F, G) \
    "movq " OFF "(%[b]), %%rdx\n\t"                 \
    "xorl %%eax, %%eax\n\t"                         \
    CUZK_X86_MAC("0(%[a])", A, B)                   \
    CUZK_X86_MAC("8(%[a])", B, C)                   \
    CUZK_X86_MAC("16(%[a])", C, D)                  \
    CUZK_X86_MAC("24(%[a])", D, E)                  \
    CUZK_X86_MAC("32(%[a])", E, F)                  \
    CUZK_X86_MUL_LAST("40(%[a])", F, G)

#define CUZK_X86_RED_ROW6(A, B, C, D, E, F, G)      \
    "movq " A ", %%rdx\n\t"                         \
    "imulq %[m6], %%rdx\n\t"                        \
    "xorl %%eax, %%eax\n\t"                         \
    CUZK_X86_MAC("%[m0]", A, B)                     \
    CUZK_X86_MAC("%[m1]", B, C)                     \
    CUZK_X86_MAC("%[m2]", C, D)                     \
    CUZK_X86_MAC("%[m3]", D, E)                     \
    CUZK_X86_MAC("%[m4]", E, F)                     \
    CUZK_X86_MAC("%[m5]", F, G)                     \
    "adcxq %%rax, " G "\n\t"

// result limb I (register T) minus p_I with borrow, stored to r[I]
#define CUZK_X86_SUB6(I, T, OP)                     \
    "movq " T ", %[lo]\n\t"                         \
    OP " %[m" #I "], %[lo]\n\t"                     \
    "movq %[lo], " #I "*8(%[r])\n\t"
// borrow: the result was < p, store it unreduced
#define CUZK_X86_SEL6(I, T)                         \
    "movq " #I "*8(%[r]), %[lo]\n\t"                \
    "cmovcq " T ", %[lo]\n\t"                       \
    "movq %[lo], " #I "*8(%[r])\n\t"

inline __attribute__((always_inline)) void mont_mul_adx6(uint64_t* r, const uint64_t* a,
                                                         const uint64_t* b, const uint64_t (&m)[7]) {
    uint64_t lo, hi;
    __asm__ volatile(
        "movq 0(%[b]), %%rdx\n\t"
        "xorl %%eax, %%eax\n\t"
        "mulxq 0(%[a]), %%r8, %%r9\n\t"
        "mulxq 8(%[a]), %[lo], %%r10\n\t"
        "adcxq %[lo], %%r9\n\t"
        "mulxq 16(%[a]), %[lo], %%r11\n\t"
        "adcxq %[lo], %%r10\n\t"
        "mulxq 24(%[a]), %[lo], %%r12\n\t"
        "adcxq %[lo], %%r11\n\t"
        "mulxq 32(%[a]), %[lo], %%r13\n\t"
        "adcxq %[lo], %%r12\n\t"
        "mulxq 40(%[a]), %[lo], %%r14\n\t"
        "adcxq %[lo], %%r13\n\t"
        "adcxq %%rax, %%r14\n\t"
        CUZK_X86_RED_ROW6("%%r8", "%%r9", "%%r10", "%%r11", "%%r12", "%%r13", "%%r14")
        CUZK_X86_MUL_ROW6("8", "%%r9", "%%r10", "%%r11", "%%r12", "%%r13", "%%r14", "%%r8")
        CUZK_X86_RED_ROW6("%%r9", "%%r10", "%%r11", "%%r12", "%%r13", "%%r14", "%%r8")
        CUZK_X86_MUL_ROW6("16", "%%r10", "%%r11", "%%r12", "%%r13", "%%r14", "%%r8", "%%r9")
        CUZK_X86_RED_ROW6("%%r10", "%%r11", "%%r12", "%%r13", "%%r14", "%%r8", "%%r9")
        CUZK_X86_MUL_ROW6("24", "%%r11", "%%r12", "%%r13", "%%r14", "%%r8", "%%r9", "%%r10")
        CUZK_X86_RED_ROW6("%%r11", "%%r12", "%%r13", "%%r14", "%%r8", "%%r9", "%%r10")
        CUZK_X86_MUL_ROW6("32", "%%r12", "%%r13", "%%r14", "%%r8", "%%r9", "%%r10", "%%r11")
        CUZK_X86_RED_ROW6("%%r12", "%%r13", "%%r14", "%%r8", "%%r9", "%%r10", "%%r11")
        CUZK_X86_MUL_ROW6("40", "%%r13", "%%r14", "%%r8", "%%r9", "%%r10", "%%r11", "%%r12")
        CUZK_X86_RED_ROW6("%%r13", "%%r14", "%%r8", "%%r9", "%%r10", "%%r11", "%%r12")
        // result (r14, r8, r9, r10, r11, r12) < 2p: store it minus p, then put it
        // back if that borrowed (mov and cmov leave the flags alone)
        CUZK_X86_SUB6(0, "%%r14", "subq")
        CUZK_X86_SUB6(1, "%%r8", "sbbq")
        CUZK_X86_SUB6(2, "%%r9", "sbbq")
        CUZK_X86_SUB6(3, "%%r10", "sbbq")
        CUZK_X86_SUB6(4, "%%r11", "sbbq")
        CUZK_X86_SUB6(5, "%%r12", "sbbq")
        CUZK_X86_SEL6(0, "%%r14")
        CUZK_X86_SEL6(1, "%%r8")
        CUZK_X86_SEL6(2, "%%r9")
        CUZK_X86_SEL6(3, "%%r10")
        CUZK_X86_SEL6(4, "%%r11")
        CUZK_X86_SEL6(5, "%%r12")
        : [lo] "=&r"(lo), [hi] "=&r"(hi)
        : [a] "r"(a), [b] "r"(b), [r] "r"(r), [m0] "m"(m[0]), [m1] "m"(m[1]),
          [m2] "m"(m[2]), [m3] "m"(m[3]), [m4] "m"(m[4]), [m5] "m"(m[5]), [m6] "m"(m[6])
        : "rax", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "cc", "memory");
}

#undef CUZK_X86_MAC
#undef CUZK_X86_MUL_LAST
#undef CUZK_X86_MUL_ROW
#undef CUZK_X86_RED_ROW
#undef CUZK_X86_MUL_ROW6
#undef CUZK_X86_RED_ROW6
#undef CUZK_X86_SUB6
#undef CUZK_X86_SEL6

}  // namespace x86
}  // namespace cuzk

#endif  // CUZK_FIELD_X86_64_HPP
