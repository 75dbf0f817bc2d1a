// Per-call cost of a custom C op from C++ next to the built-in op doing the same work
// (bench/bench_custom_op.py runs it). Usage: flambeau-bench-custom-op <libbench_ext_add.so>
// [numel] [calls]. Prints one line per case: "name ns_per_call"; the built-in first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "flambeau/flambeau.h"
#include "flambeau/stable/extension.h"

using namespace flambeau;

// Median over rounds of the ns per call of f, the cases run in turn each round.
std::vector<double> time_cases(const std::vector<std::function<void()>>& cases, int calls, int rounds) {
  std::vector<std::vector<double>> ns(cases.size());
  for (auto& f : cases)
    for (int i = 0; i < calls / 10 + 1; ++i) f();  // warm up
  for (int r = 0; r < rounds; ++r)
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) cases[c]();
      ns[c].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
  std::vector<double> out;
  for (auto& v : ns) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <libbench_ext_add.so> [numel] [calls]\n", argv[0]);
    return 2;
  }
  load_library(argv[1]);
  const int64_t numel = argc > 2 ? std::atoll(argv[2]) : 8;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 20000;
  const Tensor a = randn({numel}), b = randn({numel});
  const RegisteredOp* builtin = find_op("add");
  const RegisteredOp* custom = find_op("bench::add");
  const RegisteredOp* loop = find_op("bench::add_loop");
  const std::vector<double> ns = time_cases(
      {
          [&] { add(a, b); },
          [&] { call_op(*builtin, {a, b}); },
          [&] { call_op(*custom, {a, b}); },
          [&] { call_op(*loop, {a, b}); },
      },
      calls, 15);
  std::printf("flambeau::add %.1f\ncall_op(add) %.1f\ncall_op(bench::add) %.1f\ncall_op(bench::add_loop) %.1f\n", ns[0],
              ns[1], ns[2], ns[3]);
  return 0;
}
