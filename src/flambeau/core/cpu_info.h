// What the CPU has, read once per process with cpuid/xgetbv (never by executing an
// instruction that could fault) and, for AMX, after asking Linux for the tile-data
// permission. Kernels ask here which path to take; tests ask here what they can run.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace flambeau {

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string model;   // brand string
  int logical_cpus = 1;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core (L1, L2) and in all (L3); 0 = unknown
  // Usable extensions: the CPU reports them and the OS saves their registers.
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_fp16 = false;
  bool amx_permitted = false;  // Linux granted this process the AMX tile data (arch_prctl)

  bool has_avx512_core() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  bool can_amx_bf16() const { return amx_tile && amx_bf16 && amx_permitted; }
};

// The CPU this process runs on (detected on first use; thread-safe).
const CpuInfo& cpu_info();

// The ISA extensions by name, each with whether this CPU has it ("avx2", "avx512_bf16", ...).
std::vector<std::pair<const char*, bool>> cpu_isa_flags(const CpuInfo& info);

// The extensions it has as one short list: "avx2 fma f16c avx512f ... amx_bf16".
std::string cpu_isa_string(const CpuInfo& info);

}  // namespace flambeau
