// Host-only whole-file Groth16 prove: a snarkjs zkey and a circom witness file in, the
// proof's points and the public signals out, with no Python in between.  This is what
// `cuzk-tasks prove` runs on the CPU core, so that a small proof does not pay for
// importing numpy (several times the proof itself).
//
// The steps are those of cuzk_tasks/groth16/prover.py (prove_start, then prove_finish),
// which stays the reference and the pipeline's prover:
//   pi_A = alpha + sum w_i A_i + r delta                      (G1)
//   pi_B = beta + sum w_i B_i + s delta                       (G2)
//   pi_C = sum_{private i} w_i C_i + sum h_j H_j + s pi_A + r B'_1 - r s delta
//          with B'_1 = beta + sum w_i B_i + s delta in G1
// and the same tiny MSMs for the assembly, so that given r and s both give the same
// proof bit for bit (tests/test_native_prove.py).  The file readers here check only what
// this code relies on (magic, versions, primes, sizes, canonical values); anything else
// is PROVE_FORMAT, and the caller then runs the Python readers, whose errors name the file
// and the field.  Nothing is printed and nothing is thrown out of prove_files().
#ifndef CUZK_PROVE_CPU_HPP
#define CUZK_PROVE_CPU_HPP

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "curve.cuh"
#include "msm_cpu.hpp"
#include "pairing.hpp"
#include "qap_cpu.hpp"

namespace cuzk {

enum ProveStatus {
    PROVE_OK = 0,
    PROVE_IO = 1,           // a file could not be opened, read or mapped
    PROVE_FORMAT = 2,       // a file is not what this reader accepts
    PROVE_UNSATISFIED = 3,  // the proof failed self-verification
    PROVE_RANDOM = 4,       // getrandom failed
};

// Step timings, milliseconds, in this order (prover.py's names).
enum ProveStep {
    STEP_LOAD, STEP_EVALUATE_AB, STEP_COMPUTE_H, STEP_MSM_H, STEP_MSM_A, STEP_MSM_B1,
    STEP_MSM_C, STEP_MSM_B2, STEP_ASSEMBLE, STEP_SELF_VERIFY, PROVE_STEPS
};

// A whole file mapped read-only; pages of consumed sections can be handed back.
class MappedFile {
  public:
    MappedFile() = default;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile() {
        if (data_) munmap((void*)data_, size_);
        if (fd_ >= 0) ::close(fd_);
    }
    bool open(const char* path) {
        fd_ = ::open(path, O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) return false;
        struct stat st;
        if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return false;
        size_ = (uint64_t)st.st_size;
        if (size_ == 0) return true;
        void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
        if (p == MAP_FAILED) return false;
        data_ = (const uint8_t*)p;
        return true;
    }
    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    // Let the OS reclaim the whole pages inside [off, off + len): a one-shot prove keeps
    // its peak RSS near one section plus scratch (prover.py's release_pages).
    void release(uint64_t off, uint64_t len) const {
        const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t lo = (off + page - 1) / page * page, hi = (off + len) / page * page;
        if (data_ && hi > lo) madvise((void*)(data_ + lo), hi - lo, MADV_DONTNEED);
    }

  private:
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
    int fd_ = -1;
};

struct FileSection {
    uint64_t off = 0, size = 0;
    bool present = false;
};

inline uint32_t read_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint64_t read_u64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// The section table of a snarkjs/circom binary file: magic (4 bytes), u32 version,
// u32 count, then count x (u32 type, u64 size, the bytes).  Types 1..max_type land in
// out[type] (a second one of the same type is refused); other types are skipped.
inline bool read_section_table(const MappedFile& f, const char* magic, uint32_t version,
                               FileSection* out, uint32_t max_type) {
    const uint8_t* d = f.data();
    const uint64_t n = f.size();
    if (n < 12 || std::memcmp(d, magic, 4) != 0 || read_u32(d + 4) != version) return false;
    const uint32_t count = read_u32(d + 8);
    uint64_t pos = 12;
    for (uint32_t i = 0; i < count; ++i) {
        if (n - pos < 12) return false;
        const uint32_t type = read_u32(d + pos);
        const uint64_t size = read_u64(d + pos + 4);
        pos += 12;
        if (size > n - pos) return false;
        if (type >= 1 && type <= max_type) {
            if (out[type].present) return false;
            out[type].off = pos;
            out[type].size = size;
            out[type].present = true;
        }
        pos += size;
    }
    return true;
}

// n little-endian limbs equal to a field's modulus?
template <class F>
bool is_modulus(const uint8_t* bytes) {
    const F m = F::modulus_limbs();
    for (int i = 0; i < F::N; ++i)
        if (read_u64(bytes + 8 * i) != m.v[i]) return false;
    return true;
}

// Decimal digits of a little-endian limb integer (what snarkjs's JSON files hold).
inline std::string limbs_to_decimal(const uint64_t* limbs, int n) {
    uint64_t v[8];
    std::memcpy(v, limbs, sizeof(uint64_t) * n);
    std::string digits;
    const uint64_t chunk = 10000000000000000000ULL;  // 10^19
    for (;;) {
        bool zero = true;
        for (int i = 0; i < n; ++i) zero = zero && v[i] == 0;
        if (zero) break;
        unsigned __int128 rem = 0;
        for (int i = n - 1; i >= 0; --i) {
            unsigned __int128 cur = (rem << 64) | v[i];
            v[i] = (uint64_t)(cur / chunk);
            rem = cur % chunk;
        }
        uint64_t r = (uint64_t)rem;
        for (int k = 0; k < 19; ++k) {
            digits.push_back(char('0' + r % 10));
            r /= 10;
        }
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    if (digits.empty()) digits = "0";
    return std::string(digits.rbegin(), digits.rend());
}

template <class F>
std::string field_to_decimal(const F& x) {
    uint64_t l[F::N];
    x.to_standard(l);
    return limbs_to_decimal(l, F::N);
}

// The proof as text: one line per point, "inf" or its affine coordinates in decimal
// (G1: x y; G2: x.c0 x.c1 y.c0 y.c1), pi_A, pi_B, pi_C, then one line per public signal.
template <class C>
std::string proof_text(const typename C::G1::Affine& a, const typename C::G2::Affine& b,
                       const typename C::G1::Affine& c, const uint64_t* public_signals,
                       uint64_t n_public) {
    std::string out;
    auto g1 = [&](const typename C::G1::Affine& p) {
        if (p.is_inf()) out += "inf";
        else out += field_to_decimal(p.x) + " " + field_to_decimal(p.y);
        out += "\n";
    };
    g1(a);
    if (b.is_inf()) out += "inf";
    else out += field_to_decimal(b.x.c0) + " " + field_to_decimal(b.x.c1) + " " +
                field_to_decimal(b.y.c0) + " " + field_to_decimal(b.y.c1);
    out += "\n";
    g1(c);
    for (uint64_t i = 0; i < n_public; ++i)
        out += limbs_to_decimal(public_signals + 4 * i, 4) + "\n";
    return out;
}

// A uniform scalar in [0, r) from the kernel's CSPRNG (rejection sampling).
template <class Fr>
bool random_scalar(uint64_t* out) {
    const int top_bits = Fr::BITS - 64 * (Fr::N - 1);
    const uint64_t mask = top_bits >= 64 ? ~0ULL : ((1ULL << top_bits) - 1);
    for (;;) {
        uint8_t* p = reinterpret_cast<uint8_t*>(out);
        size_t got = 0;
        while (got < sizeof(uint64_t) * Fr::N) {
            ssize_t k = getrandom(p + got, sizeof(uint64_t) * Fr::N - got, 0);
            if (k < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            got += (size_t)k;
        }
        out[Fr::N - 1] &= mask;
        if (Fr::is_canonical(out)) return true;
    }
}

template <class C>
class WholeFileProver {
  public:
    typedef typename C::Fr Fr;
    typedef typename C::Fq Fq;
    typedef typename C::G1 G1;
    typedef typename C::G2 G2;
    typedef typename G1::Affine G1Affine;
    typedef typename G2::Affine G2Affine;
    static constexpr uint64_t kG1 = sizeof(G1Affine), kG2 = sizeof(G2Affine);
    static constexpr uint64_t kFr = 8 * Fr::N;

    // zs / ws: the zkey's and the witness's section tables (read_section_table).
    // rs: r and s (4 limbs each, standard form, < r), or NULL to draw them.
    static int prove(const MappedFile& zkey, const FileSection* zs, const MappedFile& wtns,
                     const FileSection* ws, const uint64_t* rs, bool verify, int threads,
                     std::string& out, double* ms) {
        auto t = std::chrono::steady_clock::now();
        auto lap = [&](int step) {
            auto now = std::chrono::steady_clock::now();
            ms[step] = std::chrono::duration<double, std::milli>(now - t).count();
            t = now;
        };
        const uint8_t* z = zkey.data();
        // ---- section 2, the groth16 header (the caller matched q to this curve)
        const uint8_t* h = z + zs[2].off;
        const uint64_t n8q = 8 * Fq::N;
        if (zs[2].size != 4 + n8q + 4 + kFr + 12 + 3 * kG1 + 3 * kG2) return PROVE_FORMAT;
        if (read_u32(h + 4 + n8q) != kFr || !is_modulus<Fr>(h + 4 + n8q + 4)) return PROVE_FORMAT;
        const uint8_t* p = h + 4 + n8q + 4 + kFr;
        const uint64_t n_vars = read_u32(p), n_public = read_u32(p + 4),
                       domain = read_u32(p + 8);
        p += 12;
        if (domain == 0 || (domain & (domain - 1)) || n_public + 1 > n_vars) return PROVE_FORMAT;
        uint32_t log_n = 0;
        while (((uint64_t)1 << log_n) < domain) ++log_n;
        if (log_n >= C::FR_MAX_LOG2) return PROVE_FORMAT;
        G1Affine alpha1, beta1, delta1;
        G2Affine beta2, gamma2, delta2;
        std::memcpy((void*)&alpha1, p, kG1); p += kG1;
        std::memcpy((void*)&beta1, p, kG1); p += kG1;
        std::memcpy((void*)&beta2, p, kG2); p += kG2;
        std::memcpy((void*)&gamma2, p, kG2); p += kG2;
        std::memcpy((void*)&delta1, p, kG1); p += kG1;
        std::memcpy((void*)&delta2, p, kG2);
        if (!g1_ok(alpha1) || !g1_ok(beta1) || !g1_ok(delta1) || !g2_ok(beta2) ||
            !g2_ok(gamma2) || !g2_ok(delta2))
            return PROVE_FORMAT;
        // ---- section sizes (zkey.py's _expected_sizes)
        const uint64_t n_c = n_vars - n_public - 1;
        if (!sized(zs[3], (n_public + 1) * kG1) || !sized(zs[5], n_vars * kG1) ||
            !sized(zs[6], n_vars * kG1) || !sized(zs[7], n_vars * kG2) ||
            !sized(zs[8], n_c * kG1) || !sized(zs[9], domain * kG1) || !zs[4].present ||
            zs[4].size < 4)
            return PROVE_FORMAT;
        const uint64_t n_coefs = read_u32(z + zs[4].off);
        if (zs[4].size != 4 + n_coefs * coef_record_size<Fr>()) return PROVE_FORMAT;
        // ---- the witness: section 1 = u32 n8, the prime, u32 count; section 2 = values
        const uint8_t* w1 = wtns.data() + ws[1].off;
        if (!ws[1].present || ws[1].size != 4 + kFr + 4 || read_u32(w1) != kFr ||
            !is_modulus<Fr>(w1 + 4) || read_u32(w1 + 4 + kFr) != n_vars ||
            !sized(ws[2], n_vars * kFr))
            return PROVE_FORMAT;
        std::vector<uint64_t> w((size_t)n_vars * 4);
        std::memcpy(w.data(), wtns.data() + ws[2].off, n_vars * kFr);
        if (w[0] != 1 || w[1] || w[2] || w[3]) return PROVE_FORMAT;
        for (uint64_t i = 0; i < n_vars; ++i)
            if (!Fr::is_canonical(w.data() + 4 * i)) return PROVE_FORMAT;
        lap(STEP_LOAD);

        // ---- prove_start: the QAP, H and the four G1 MSMs; prove_finish's G2 MSM
        std::vector<Fr> a((size_t)domain), b((size_t)domain);
        if (evaluate_ab<C>(z + zs[4].off + 4, n_coefs, w.data(), n_vars, domain, a.data(),
                           b.data(), threads) != QAP_OK)
            return PROVE_FORMAT;
        release(zkey, zs[4]);
        lap(STEP_EVALUATE_AB);
        G1Affine sum_h, sum_a, sum_b1, sum_c;
        G2Affine sum_b2;
        const MsmInputs in = {z, zs, w.data(), n_vars, n_public, domain, log_n};
        const bool ok = domain <= kPooledMaxDomain
                            ? pooled_msms(zkey, in, a, b, threads, sum_h, sum_a, sum_b1, sum_c, sum_b2, ms)
                            : sequential_msms(zkey, in, a, b, threads, sum_h, sum_a, sum_b1, sum_c, sum_b2, ms);
        if (!ok) return PROVE_FORMAT;
        t = std::chrono::steady_clock::now();

        // ---- prove_finish: r and s, the assembly, the self-check
        uint64_t r[4], s[4];
        if (rs) {
            std::memcpy(r, rs, sizeof(r));
            std::memcpy(s, rs + 4, sizeof(s));
            if (!Fr::is_canonical(r) || !Fr::is_canonical(s)) return PROVE_FORMAT;
        } else if (!random_scalar<Fr>(r) || !random_scalar<Fr>(s)) {
            return PROVE_RANDOM;
        }
        uint64_t one[4] = {1, 0, 0, 0}, minus_rs[4];
        Fr::neg(Fr::mul(Fr::from_standard(r), Fr::from_standard(s))).to_standard(minus_rs);
        const G1Affine pi_a = combine<G1>({alpha1, sum_a, delta1}, {one, one, r});
        const G1Affine b1 = combine<G1>({beta1, sum_b1, delta1}, {one, one, s});
        const G2Affine pi_b = combine<G2>({beta2, sum_b2, delta2}, {one, one, s});
        const G1Affine pi_c = combine<G1>({sum_c, sum_h, pi_a, b1, delta1},
                                          {one, one, s, r, minus_rs});
        lap(STEP_ASSEMBLE);
        if (verify) {
            // e(-A, B) e(alpha, beta) e(vk_x, gamma) e(C, delta) == 1, vk_x = IC_0 + sum
            // public_i IC_i (verifier.py)
            const G1Affine* ic = reinterpret_cast<const G1Affine*>(z + zs[3].off);
            for (uint64_t i = 0; i <= n_public; ++i)
                if (!g1_ok(ic[i])) return PROVE_FORMAT;
            const G1Affine vk_x =
                G1::xyzz_to_affine(PippengerMsm<G1>::run(ic, w.data(), n_public + 1, 1));
            const G1Affine g1s[4] = {G1::neg(pi_a), alpha1, vk_x, pi_c};
            const G2Affine g2s[4] = {pi_b, beta2, gamma2, delta2};
            if (!Pairing<C>::pairing_check(g1s, g2s, 4)) return PROVE_UNSATISFIED;
        }
        lap(STEP_SELF_VERIFY);
        out = proof_text<C>(pi_a, pi_b, pi_c, w.data() + 4, n_public);
        return PROVE_OK;
    }

  private:
    static bool sized(const FileSection& s, uint64_t size) { return s.present && s.size == size; }

    static bool g1_ok(const G1Affine& p) { return G1::is_canonical(p) && G1::is_on_curve(p); }
    static bool g2_ok(const G2Affine& p) { return G2::is_canonical(p) && G2::is_on_curve(p); }

    static void release(const MappedFile& f, const FileSection& s) { f.release(s.off, s.size); }

    // Up to this domain the MSMs share one pool (pooled_msms); above it they run one after
    // another (sequential_msms), which keeps one section's pages resident at a time: at
    // 2^20 the pool's peak RSS was 2.5x (642 against 255 MiB), for no gain in time.
    static constexpr uint64_t kPooledMaxDomain = (uint64_t)1 << 15;

    struct MsmInputs {
        const uint8_t* z;
        const FileSection* zs;
        const uint64_t* w;
        uint64_t n_vars, n_public, domain;
        uint32_t log_n;
    };

    // The MSMs of the witness (A, B1, C, then B2) share one pool of work units, which every
    // thread takes from while one of them first computes H (on a quarter of the threads: H
    // is a few percent of the work); H's MSM follows.  On two cores this keeps both busy
    // through H, the small MSMs and each MSM's tail.  Each section's pages go back as soon
    // as its MSM is done.  Step times: H on its thread(s); each MSM's, the threads' time on
    // its units.
    static bool pooled_msms(const MappedFile& zkey, const MsmInputs& in, std::vector<Fr>& a,
                            std::vector<Fr>& b, int threads, G1Affine& sum_h, G1Affine& sum_a,
                            G1Affine& sum_b1, G1Affine& sum_c, G2Affine& sum_b2, double* ms) {
        const FileSection* zs = in.zs;
        const uint64_t n_c = in.n_vars - in.n_public - 1;
        const G1Affine* a_bases = g1_bases(zkey, zs[5], in.n_vars);
        const G1Affine* b1_bases = g1_bases(zkey, zs[6], in.n_vars);
        const G1Affine* c_bases = g1_bases(zkey, zs[8], n_c);
        const G1Affine* h_bases = g1_bases(zkey, zs[9], in.domain);
        const G2Affine* b2_bases = g2_bases(zkey, zs[7], in.n_vars);
        if (!a_bases || !b1_bases || !c_bases || !h_bases || !b2_bases) return false;
        auto releasing = [&zkey, zs](int section) {
            return [&zkey, zs, section]() { release(zkey, zs[section]); };
        };
        typename PippengerMsm<G1>::Batch witness_g1, h_g1;
        typename PippengerMsm<G2>::Batch witness_g2;
        const int msm_a = witness_g1.add(a_bases, in.w, in.n_vars, threads, releasing(5));
        const int msm_b1 = witness_g1.add(b1_bases, in.w, in.n_vars, threads, releasing(6));
        const int msm_c =
            witness_g1.add(c_bases, in.w + 4 * (in.n_public + 1), n_c, threads, releasing(8));
        const int msm_b2 = witness_g2.add(b2_bases, in.w, in.n_vars, threads, releasing(7));
        std::vector<uint64_t> hs((size_t)in.domain * 4);
        std::atomic<bool> h_added(false);
        int msm_h = 0;
        run_threads(resolve_threads(threads), [&](int tid) {
            if (tid == 0) {
                try {
                    const auto t0 = std::chrono::steady_clock::now();
                    compute_h<C>(a.data(), b.data(), in.log_n,
                                 std::max(1, resolve_threads(threads) / 4), hs.data());
                    std::vector<Fr>().swap(a);
                    std::vector<Fr>().swap(b);
                    ms[STEP_COMPUTE_H] = std::chrono::duration<double, std::milli>(
                                             std::chrono::steady_clock::now() - t0).count();
                    msm_h = h_g1.add(h_bases, hs.data(), in.domain, threads, releasing(9));
                } catch (...) {  // the others must not wait for H; run_threads rethrows
                    h_added.store(true, std::memory_order_release);
                    throw;
                }
                h_added.store(true, std::memory_order_release);
            }
            witness_g1.work();
            while (!h_added.load(std::memory_order_acquire)) std::this_thread::yield();
            h_g1.work();
            witness_g2.work();
        });
        sum_h = G1::xyzz_to_affine(h_g1.result(msm_h));
        sum_a = G1::xyzz_to_affine(witness_g1.result(msm_a));
        sum_b1 = G1::xyzz_to_affine(witness_g1.result(msm_b1));
        sum_c = G1::xyzz_to_affine(witness_g1.result(msm_c));
        sum_b2 = G2::xyzz_to_affine(witness_g2.result(msm_b2));
        ms[STEP_MSM_H] = h_g1.unit_ms(msm_h);
        ms[STEP_MSM_A] = witness_g1.unit_ms(msm_a);
        ms[STEP_MSM_B1] = witness_g1.unit_ms(msm_b1);
        ms[STEP_MSM_C] = witness_g1.unit_ms(msm_c);
        ms[STEP_MSM_B2] = witness_g2.unit_ms(msm_b2);
        return true;
    }

    // H on every thread, then each MSM on every thread, its section checked just before and
    // released just after.  Step times are wall times.
    static bool sequential_msms(const MappedFile& zkey, const MsmInputs& in, std::vector<Fr>& a,
                                std::vector<Fr>& b, int threads, G1Affine& sum_h,
                                G1Affine& sum_a, G1Affine& sum_b1, G1Affine& sum_c,
                                G2Affine& sum_b2, double* ms) {
        const FileSection* zs = in.zs;
        auto t = std::chrono::steady_clock::now();
        auto lap = [&](int step) {
            const auto now = std::chrono::steady_clock::now();
            ms[step] = std::chrono::duration<double, std::milli>(now - t).count();
            t = now;
        };
        std::vector<uint64_t> hs((size_t)in.domain * 4);
        compute_h<C>(a.data(), b.data(), in.log_n, threads, hs.data());
        std::vector<Fr>().swap(a);
        std::vector<Fr>().swap(b);
        lap(STEP_COMPUTE_H);
        if (!g1_msm(zkey, zs[9], hs.data(), in.domain, threads, sum_h)) return false;
        std::vector<uint64_t>().swap(hs);
        lap(STEP_MSM_H);
        if (!g1_msm(zkey, zs[5], in.w, in.n_vars, threads, sum_a)) return false;
        lap(STEP_MSM_A);
        if (!g1_msm(zkey, zs[6], in.w, in.n_vars, threads, sum_b1)) return false;
        lap(STEP_MSM_B1);
        if (!g1_msm(zkey, zs[8], in.w + 4 * (in.n_public + 1), in.n_vars - in.n_public - 1,
                    threads, sum_c))
            return false;
        lap(STEP_MSM_C);
        const G2Affine* b2_bases = g2_bases(zkey, zs[7], in.n_vars);
        if (!b2_bases) return false;
        sum_b2 = G2::xyzz_to_affine(PippengerMsm<G2>::run(b2_bases, in.w, in.n_vars, threads));
        release(zkey, zs[7]);
        lap(STEP_MSM_B2);
        return true;
    }

    static bool g1_msm(const MappedFile& zkey, const FileSection& sec, const uint64_t* scalars,
                       uint64_t n, int threads, G1Affine& out) {
        const G1Affine* bases = g1_bases(zkey, sec, n);
        if (!bases) return false;
        out = G1::xyzz_to_affine(PippengerMsm<G1>::run(bases, scalars, n, threads));
        release(zkey, sec);
        return true;
    }

    // A section of n G2 bases, or NULL when one is not canonical.
    static const G2Affine* g2_bases(const MappedFile& zkey, const FileSection& sec, uint64_t n) {
        const G2Affine* bases = reinterpret_cast<const G2Affine*>(zkey.data() + sec.off);
        for (uint64_t i = 0; i < n; ++i)
            if (!G2::is_canonical(bases[i])) return nullptr;
        return bases;
    }

    // A section of n G1 bases, or NULL when one is not canonical.
    static const G1Affine* g1_bases(const MappedFile& zkey, const FileSection& sec, uint64_t n) {
        const G1Affine* bases = reinterpret_cast<const G1Affine*>(zkey.data() + sec.off);
        for (uint64_t i = 0; i < n; ++i)
            if (!G1::is_canonical(bases[i])) return nullptr;
        return bases;
    }

    // sum k_i P_i as a tiny MSM, as prover.py's assemble_proof computes it.
    template <class G, size_t K>
    static typename G::Affine combine(const typename G::Affine (&pts)[K],
                                      const uint64_t* const (&ks)[K]) {
        uint64_t scalars[4 * K];
        for (size_t i = 0; i < K; ++i) std::memcpy(scalars + 4 * i, ks[i], 32);
        return G::xyzz_to_affine(PippengerMsm<G>::run(pts, scalars, K, 1));
    }
};

// The whole prove of two files.  curve_out: 0 = BN254, 1 = BLS12-381 (from the zkey's q).
inline int prove_files(const char* zkey_path, const char* wtns_path, const uint64_t* rs,
                       bool verify, int threads, int* curve_out, std::string& out,
                       double* ms) {
    for (int i = 0; i < PROVE_STEPS; ++i) ms[i] = 0.0;
    MappedFile zkey, wtns;
    if (!zkey.open(zkey_path) || !wtns.open(wtns_path)) return PROVE_IO;
    FileSection zs[10], ws[3];
    if (!read_section_table(zkey, "zkey", 1, zs, 9) || !read_section_table(wtns, "wtns", 2, ws, 2))
        return PROVE_FORMAT;
    if (!zs[1].present || zs[1].size != 4 || read_u32(zkey.data() + zs[1].off) != 1 ||
        !zs[2].present || zs[2].size < 4)
        return PROVE_FORMAT;  // section 1: protocol 1 = groth16
    const uint8_t* h = zkey.data() + zs[2].off;
    const uint32_t n8q = read_u32(h);
    if (zs[2].size < 4 + (uint64_t)n8q) return PROVE_FORMAT;
    if (n8q == 8 * BN254::Fq::N && is_modulus<BN254::Fq>(h + 4)) {
        *curve_out = 0;
        return WholeFileProver<BN254>::prove(zkey, zs, wtns, ws, rs, verify, threads, out, ms);
    }
    if (n8q == 8 * BLS12_381::Fq::N && is_modulus<BLS12_381::Fq>(h + 4)) {
        *curve_out = 1;
        return WholeFileProver<BLS12_381>::prove(zkey, zs, wtns, ws, rs, verify, threads, out,
                                                 ms);
    }
    return PROVE_FORMAT;
}

}  // namespace cuzk

#endif  // CUZK_PROVE_CPU_HPP
