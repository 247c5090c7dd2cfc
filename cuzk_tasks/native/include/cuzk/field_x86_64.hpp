// Host-only x86-64 inline-assembly kernels for the 4-limb Montgomery field.
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
#define CUZK_X86_MUL_ROW(OFF, A, B, C, D, E)          \
    "movq " OFF "(%[b]), %%rdx\n\t"                   \
    "xorl %%eax, %%eax\n\t"                           \
    "mulxq 0(%[a]), %[lo], %[hi]\n\t"                 \
    "adcxq %[lo], " A "\n\t"                          \
    "adoxq %[hi], " B "\n\t"                          \
    "mulxq 8(%[a]), %[lo], %[hi]\n\t"                 \
    "adcxq %[lo], " B "\n\t"                          \
    "adoxq %[hi], " C "\n\t"                          \
    "mulxq 16(%[a]), %[lo], %[hi]\n\t"                \
    "adcxq %[lo], " C "\n\t"                          \
    "adoxq %[hi], " D "\n\t"                          \
    "mulxq 24(%[a]), %[lo], " E "\n\t"                \
    "adcxq %[lo], " D "\n\t"                          \
    "adoxq %%rax, " E "\n\t"                          \
    "adcxq %%rax, " E "\n\t"

#define CUZK_X86_RED_ROW(A, B, C, D, E)               \
    "movq " A ", %%rdx\n\t"                           \
    "imulq 32+%[m], %%rdx\n\t"                       \
    "xorl %%eax, %%eax\n\t"                           \
    "mulxq 0+%[m], %[lo], %[hi]\n\t"                 \
    "adcxq %[lo], " A "\n\t"                          \
    "adoxq %[hi], " B "\n\t"                          \
    "mulxq 8+%[m], %[lo], %[hi]\n\t"                 \
    "adcxq %[lo], " B "\n\t"                          \
    "adoxq %[hi], " C "\n\t"                          \
    "mulxq 16+%[m], %[lo], %[hi]\n\t"                \
    "adcxq %[lo], " C "\n\t"                          \
    "adoxq %[hi], " D "\n\t"                          \
    "mulxq 24+%[m], %[lo], %[hi]\n\t"                \
    "adcxq %[lo], " D "\n\t"                          \
    "adoxq %[hi], " E "\n\t"                          \
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
        "subq 0+%[m], %[lo]\n\t"
        "movq %%r8, %[hi]\n\t"
        "sbbq 8+%[m], %[hi]\n\t"
        "movq %%r9, %[o2]\n\t"
        "sbbq 16+%[m], %[o2]\n\t"
        "movq %%r10, %[o3]\n\t"
        "sbbq 24+%[m], %[o3]\n\t"
        "cmovcq %%r12, %[lo]\n\t"
        "cmovcq %%r8, %[hi]\n\t"
        "cmovcq %%r9, %[o2]\n\t"
        "cmovcq %%r10, %[o3]\n\t"
        : [lo] "=&r"(o0), [hi] "=&r"(o1), [o2] "=&r"(o2), [o3] "=&r"(o3)
        : [a] "r"(a), [b] "r"(b), [m] "m"(m),
          "m"(*(const uint64_t(*)[4])a), "m"(*(const uint64_t(*)[4])b)
        : "rax", "rdx", "r8", "r9", "r10", "r11", "r12", "cc");
    r[0] = o0;
    r[1] = o1;
    r[2] = o2;
    r[3] = o3;
}

#undef CUZK_X86_MUL_ROW
#undef CUZK_X86_RED_ROW

}  // namespace x86
}  // namespace cuzk

#endif  // CUZK_FIELD_X86_64_HPP
