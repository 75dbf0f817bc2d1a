// CPU feature detection with cpuid and xgetbv: a feature counts when the CPU reports it and
// the OS has enabled its register state (XCR0), so using it cannot fault. AMX also needs the
// process to ask Linux for permission to use the tile data (ARCH_REQ_XCOMP_PERM).
#include "flambeau/core/cpu_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif

namespace flambeau {
namespace {

#if defined(__x86_64__)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

uint64_t xcr0() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return (v >> i) & 1u; }

// Linux (5.16+) gives a process AMX tile data only once it asks (ARCH_REQ_XCOMP_PERM).
bool request_amx_permission() {
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

void detect_isa(CpuInfo& info) {
  const Regs v = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4), std::memcpy(vendor + 4, &v.d, 4), std::memcpy(vendor + 8, &v.c, 4);
  info.vendor = vendor;
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    info.model = brand;
    info.model.erase(0, info.model.find_first_not_of(' '));
  }
  const unsigned max_leaf = v.a;
  const Regs l1 = cpuid(1);
  const bool osxsave = bit(l1.c, 27);
  const uint64_t x = osxsave ? xcr0() : 0;
  const bool ymm = (x & 0x6) == 0x6, zmm = ymm && (x & 0xe0) == 0xe0, tiles = (x & 0x60000) == 0x60000;
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs l7_1 = max_leaf >= 7 ? cpuid(7, 1) : Regs{};
  info.fma = ymm && bit(l1.c, 12);
  info.f16c = ymm && bit(l1.c, 29);
  info.avx2 = ymm && bit(l7.b, 5);
  info.avx512f = zmm && bit(l7.b, 16);
  info.avx512dq = info.avx512f && bit(l7.b, 17);
  info.avx512bw = info.avx512f && bit(l7.b, 30);
  info.avx512vl = info.avx512f && bit(l7.b, 31);
  info.avx512_vnni = info.avx512f && bit(l7.c, 11);
  info.avx512_fp16 = info.avx512f && bit(l7.d, 23);
  info.avx512_bf16 = info.avx512f && bit(l7_1.a, 5);
  info.amx_bf16 = tiles && bit(l7.d, 22);
  info.amx_tile = tiles && bit(l7.d, 24);
  info.amx_fp16 = tiles && bit(l7_1.a, 21);
  info.amx_permitted = info.amx_tile && request_amx_permission();
}
#else
void detect_isa(CpuInfo&) {}
#endif

int64_t cache_bytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? v : 0;
}

CpuInfo detect() {
  CpuInfo info;
  detect_isa(info);
  info.logical_cpus = std::max(1u, std::thread::hardware_concurrency());
  info.l1d_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE);
  info.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE);
  info.l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE);
  return info;
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

std::vector<std::pair<const char*, bool>> cpu_isa_flags(const CpuInfo& c) {
  return {{"avx2", c.avx2},           {"fma", c.fma},
          {"f16c", c.f16c},           {"avx512f", c.avx512f},
          {"avx512bw", c.avx512bw},   {"avx512vl", c.avx512vl},
          {"avx512dq", c.avx512dq},   {"avx512_vnni", c.avx512_vnni},
          {"avx512_bf16", c.avx512_bf16}, {"avx512_fp16", c.avx512_fp16},
          {"amx_tile", c.amx_tile},   {"amx_bf16", c.amx_bf16},
          {"amx_fp16", c.amx_fp16}};
}

std::string cpu_isa_string(const CpuInfo& c) {
  std::string s;
  for (const auto& [name, on] : cpu_isa_flags(c))
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "baseline x86-64" : s;
}

}  // namespace flambeau
