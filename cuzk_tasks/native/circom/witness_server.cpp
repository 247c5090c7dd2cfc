// circom's C++ witness generator (circom --c), kept running between witnesses.
//
// circom's own main() computes one witness and exits, so every witness pays for loading the
// circuit's .dat and for the kernel zeroing every page of the signal memory on first touch.
// This main() keeps both: it is linked with circom's generated objects and with circom's
// main.cpp compiled under -Dmain=circom_generated_main (for loadCircuit and loadJson), and
// glibc's malloc is told to keep freed memory, so the next witness reuses the same pages.
//
// Usage: witness_server <circuit.dat> <idle seconds> <parent pid>
//
// Protocol (cuzk_tasks/groth16/native_server.py is the other end): one request per line on
// stdin, a directory D that holds D/input.json; the server writes D/witness.bin (nWitness
// values, each Fr_N64 little-endian u64 limbs in standard form: section 2 of a .wtns) and
// D/stdout, D/stderr (whatever the circuit and circom print for this witness), then answers
// on its stdout "ok <nWitness> <bytes per value> <prime as hex>\n".  Any failure ends the
// process the way circom's own main() ends (an uncaught exception or a failed assert: abort),
// and the caller reads what happened from D/stdout, D/stderr and the exit status.  It exits 0
// on end of input or after <idle seconds> without a request, and at once when <parent pid> is
// no longer its parent.

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "calcwit.hpp"
#include "circom.hpp"
#include "fr.hpp"

// From circom's main.cpp (built with -Dmain=circom_generated_main).
Circom_Circuit* loadCircuit(std::string const& datFileName);
void loadJson(Circom_CalcWit* ctx, std::string filename);

namespace {

const size_t kMaxRequest = 1 << 16;      // bytes of one request line
const size_t kChunkValues = 1 << 15;     // values per write() of the witness

void die(const char* what) {
  perror(what);
  _exit(70);
}

// One line from fd 0, without its newline; false at end of input or after idle_ms with
// nothing.  The caller sends one request and waits for its answer, so nothing is ever read
// past the newline.
bool read_request(std::string& line, int idle_ms) {
  line.clear();
  char buf[4096];
  for (;;) {
    struct pollfd p = {0, POLLIN, 0};
    int ready = poll(&p, 1, line.empty() ? idle_ms : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (ready == 0) return false;
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("read");
    }
    if (n == 0) return false;
    line.append(buf, n);
    size_t nl = line.find('\n');
    if (nl != std::string::npos) {
      line.resize(nl);
      return true;
    }
    if (line.size() > kMaxRequest) {
      fprintf(stderr, "request line longer than %zu bytes\n", kMaxRequest);
      _exit(64);
    }
  }
}

void redirect(int fd, const std::string& path) {
  int f = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f < 0) die(path.c_str());
  if (dup2(f, fd) < 0) die("dup2");
  close(f);
}

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("write");
    }
    p += n;
    size -= n;
  }
}

// The witness in standard form, as writeBinWitness writes section 2 of a .wtns.
uint write_witness(Circom_CalcWit* ctx, const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die(path.c_str());
  uint n = get_size_of_witness();
  std::vector<u64> chunk(kChunkValues * Fr_N64);
  FrElement v;
  for (uint first = 0; first < n; first += kChunkValues) {
    uint count = n - first < kChunkValues ? n - first : kChunkValues;
    for (uint i = 0; i < count; i++) {
      ctx->getWitness(first + i, &v);
      Fr_toLongNormal(&v, &v);
      memcpy(&chunk[i * Fr_N64], v.longVal, Fr_N64 * sizeof(u64));
    }
    write_all(fd, chunk.data(), count * Fr_N64 * sizeof(u64));
  }
  if (close(fd) != 0) die("close");
  return n;
}

std::string prime_hex() {
  std::string out;
  char limb[17];
  for (int i = Fr_N64 - 1; i >= 0; i--) {
    snprintf(limb, sizeof limb, "%016llx", (unsigned long long)Fr_q.longVal[i]);
    out += limb;
  }
  return out;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <circuit.dat> <idle seconds> <parent pid>\n", argv[0]);
    return 64;
  }
  const std::string dat(argv[1]);
  const double idle_s = atof(argv[2]);
  const int idle_ms = idle_s * 1000 > INT_MAX ? INT_MAX : (int)(idle_s * 1000);
  const pid_t parent = (pid_t)atol(argv[3]);

  // Keep freed memory in the heap (no mmap for big blocks, no trimming): the next witness
  // then writes pages the kernel has already zeroed once, instead of faulting in new ones.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);

  // A server outlives no caller: exit once the process that started it is gone (adopted).
  std::thread([parent] {
    for (;;) {
      if (getppid() != parent) _exit(0);
      usleep(100 * 1000);
    }
  }).detach();

  // Answers go to the original stdout; fds 1 and 2 are the current request's files.
  const int reply = fcntl(1, F_DUPFD_CLOEXEC, 3);
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (reply < 0 || devnull < 0) die("setup");
  dup2(devnull, 1);
  dup2(devnull, 2);

  Circom_Circuit* circuit = nullptr;
  std::string dir;
  while (read_request(dir, idle_ms)) {
    redirect(1, dir + "/stdout");
    redirect(2, dir + "/stderr");
    if (circuit == nullptr) circuit = loadCircuit(dat);  // its errors go to this request
    Circom_CalcWit* ctx = new Circom_CalcWit(circuit);
    loadJson(ctx, dir + "/input.json");  // runs the circuit once the last input is set
    if (ctx->getRemaingInputsToBeSet() != 0) {
      std::cerr << "Not all inputs have been set. Only "
                << get_main_input_signal_no() - ctx->getRemaingInputsToBeSet() << " out of "
                << get_main_input_signal_no() << std::endl;
      abort();
    }
    uint n = write_witness(ctx, dir + "/witness.bin");
    std::cout.flush();
    std::cerr.flush();
    fflush(stdout);
    fflush(stderr);
    // Circom_CalcWit's destructor frees nothing (circom 2.1); these two are all but every
    // byte of it.  Nulled, so that a destructor that does free them frees nothing twice.
    delete[] ctx->signalValues;
    ctx->signalValues = nullptr;
    delete[] ctx->componentMemory;
    ctx->componentMemory = nullptr;
    delete ctx;
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::string answer = "ok " + std::to_string(n) + " " + std::to_string(Fr_N64 * 8) + " " +
                         prime_hex() + "\n";
    write_all(reply, answer.data(), answer.size());
  }
  return 0;
}
