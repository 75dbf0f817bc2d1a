// Core kernels, flambeau vs PyTorch 2.13 in one process: 16M-element float32 elementwise
// ops, reductions, softmax, bf16 cast, transposed copy, and the per-op overhead of a + b
// on 4-element tensors. Alternating runs, medians, at 1 and 2 threads.
// Usage: bench_core [reps] [overhead]   (prints Markdown tables; `overhead`: only the last)
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench_util.h"
#include "flambeau/flambeau.h"

namespace fl = flambeau;

namespace {

// A torch tensor holding a copy of a contiguous float32 flambeau tensor.
at::Tensor to_torch(const fl::Tensor& t) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  return torch::from_blob(t.data_ptr(), shape, torch::kFloat32).clone();
}

double max_diff(const fl::Tensor& a, const at::Tensor& b) {
  fl::Tensor fa = a.to(fl::kFloat32).contiguous();
  at::Tensor tb = b.to(torch::kFloat32).contiguous();
  std::vector<int64_t> shape(fa.sizes().begin(), fa.sizes().end());
  at::Tensor ta = torch::from_blob(fa.data_ptr(), shape, torch::kFloat32);
  if (ta.numel() != tb.numel()) return INFINITY;
  return (ta.reshape(-1) - tb.reshape(-1)).abs().max().item<double>();
}

struct Case {
  std::string name;
  double bytes;  // DRAM traffic of one call, for the bandwidth column
  std::function<fl::Tensor()> f;
  std::function<at::Tensor()> t;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int64_t N = int64_t(1) << 24, S = 4096;
  fl::Tensor a = fl::linspace(-4, 4, N).mul(fl::linspace(1, -1, N).exp()), b = fl::linspace(3, -5, N).sin();
  fl::Tensor m = a.reshape({S, S});
  at::Tensor ta = to_torch(a), tb = to_torch(b), tm = ta.reshape({S, S});
  const double F = 4.0 * double(N);  // bytes of one float32 operand

  std::vector<Case> cases = {
      {"add", 3 * F, [&] { return a + b; }, [&] { return ta + tb; }},
      {"mul", 3 * F, [&] { return a * b; }, [&] { return ta * tb; }},
      {"exp", 2 * F, [&] { return fl::exp(a); }, [&] { return ta.exp(); }},
      {"gelu", 2 * F, [&] { return fl::gelu(a); }, [&] { return torch::gelu(ta); }},
      {"sigmoid", 2 * F, [&] { return fl::sigmoid(a); }, [&] { return ta.sigmoid(); }},
      {"sum (all)", F, [&] { return a.sum(); }, [&] { return ta.sum(); }},
      {"sum (last dim, 4096x4096)", F, [&] { return m.sum({-1}); }, [&] { return tm.sum(-1); }},
      {"amax (all)", F, [&] { return a.amax(); }, [&] { return ta.amax(); }},
      {"softmax (last dim, 4096x4096)", 2 * F, [&] { return m.softmax(-1); }, [&] { return tm.softmax(-1); }},
      {"cast to bf16", 1.5 * F, [&] { return a.to(fl::kBFloat16); }, [&] { return ta.to(torch::kBFloat16); }},
      {"clone (contiguous copy)", 2 * F, [&] { return a.clone(); }, [&] { return ta.clone(); }},
      {"transpose copy 4096x4096", 2 * F, [&] { return m.t().contiguous(); }, [&] { return tm.t().contiguous(); }},
  };

  const bool only_overhead = argc > 2 && std::string(argv[2]) == "overhead";
  if (!only_overhead) {
    std::printf("| op | threads | flambeau ms | torch ms | torch/flambeau | flambeau GB/s | max abs diff |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  for (int threads : {1, 2}) {
    if (only_overhead) break;
    fl::set_num_threads(threads);
    at::set_num_threads(threads);
    for (const Case& c : cases) {
      const double diff = max_diff(c.f(), c.t());
      bench::Pair p = bench::time_pair([&] { c.f(); }, [&] { c.t(); }, reps);
      std::printf("| %s | %d | %.3f | %.3f | %.2f | %.1f | %.2g |\n", c.name.c_str(), threads, p.flambeau_s * 1e3,
                  p.torch_s * 1e3, p.torch_s / p.flambeau_s, c.bytes / p.flambeau_s / 1e9, diff);
      std::fflush(stdout);
    }
  }

  // Per-op overhead: a + b on 4-element tensors, timed over batches of calls.
  fl::set_num_threads(1);
  at::set_num_threads(1);
  fl::Tensor sa = fl::ones({4}), sb = fl::ones({4});
  at::Tensor tsa = torch::ones({4}), tsb = torch::ones({4});
  const int calls = 20000;
  bench::Pair p = bench::time_pair(
      [&] { for (int i = 0; i < calls; ++i) { fl::Tensor r = sa + sb; } },
      [&] { for (int i = 0; i < calls; ++i) { at::Tensor r = tsa + tsb; } }, reps);
  std::printf("\n| a + b on 4 elements (C++) | flambeau ns | torch ns | torch/flambeau |\n|---|---|---|---|\n");
  std::printf("| per call | %.0f | %.0f | %.2f |\n", p.flambeau_s / calls * 1e9, p.torch_s / calls * 1e9,
              p.torch_s / p.flambeau_s);
  return 0;
}
