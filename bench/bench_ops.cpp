// Native kernels of issue 3, flambeau vs PyTorch 2.13 in one process: random numbers,
// scans, sorting, indexing, embedding backward and GEMMs. Alternating runs, medians, at 1
// and 2 threads. GEMM rows also give GFLOP/s against the machine's FMA peak.
// Usage: bench_ops [reps] [filter]   (prints a Markdown table; rows whose name contains
// `filter` only)
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "bench_util.h"
#include "flambeau/flambeau.h"

namespace fl = flambeau;

namespace {

at::ScalarType torch_dtype(fl::DType dt) {
  switch (dt) {
    case fl::DType::Float32: return torch::kFloat32;
    case fl::DType::BFloat16: return torch::kBFloat16;
    case fl::DType::Int64: return torch::kInt64;
    default: throw std::runtime_error("bench: unsupported dtype");
  }
}

// A torch tensor holding a copy of a contiguous flambeau tensor.
at::Tensor to_torch(const fl::Tensor& t) {
  const fl::Tensor c = t.contiguous();
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  return torch::from_blob(c.data_ptr(), shape, torch_dtype(c.dtype())).clone();
}

double max_diff(const fl::Tensor& a, const at::Tensor& b) {
  const at::Tensor ta = to_torch(a.to(fl::kFloat32)), tb = b.to(torch::kFloat32).contiguous();
  if (ta.numel() != tb.numel()) return INFINITY;
  return ta.numel() ? (ta.reshape(-1) - tb.reshape(-1)).abs().max().item<double>() : 0.0;
}

struct Case {
  std::string name;
  double flops;  // for GEMM rows; 0 elsewhere
  int reps;      // 0: the command line's
  std::function<fl::Tensor()> f;
  std::function<at::Tensor()> t;
  bool compare = true;  // random streams differ: no value comparison
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 11;
  const std::string filter = argc > 2 ? argv[2] : "";
  const int64_t N = int64_t(1) << 24, S = 4096;
  fl::manual_seed(0);
  fl::Tensor x = fl::randn({N}), m = fl::randn({S, S}), m1 = fl::randn({int64_t(1) << 20});
  fl::Tensor wide = fl::randn({64, 131072});
  fl::Tensor gidx = fl::randint(0, S, {S, S});
  fl::Tensor table = fl::randn({50257, 768}), tokens = fl::randint(0, 50257, {8192});
  fl::Tensor grad = fl::randn({8192, 768});
  fl::Tensor a1 = fl::randn({1024, 1024}), b1 = fl::randn({1024, 1024});
  fl::Tensor a4 = fl::randn({4096, 4096}), b4 = fl::randn({4096, 4096});
  fl::Tensor a2 = fl::randn({2048, 2048}).to(fl::kBFloat16), b2 = fl::randn({2048, 2048}).to(fl::kBFloat16);
  fl::Tensor a2f = a2.to(fl::kFloat32), b2f = b2.to(fl::kFloat32);
  fl::Tensor buf = fl::empty({N});
  at::Tensor tx = to_torch(x), tm = to_torch(m), tm1 = to_torch(m1), twide = to_torch(wide), tgidx = to_torch(gidx);
  at::Tensor ttable = to_torch(table), ttokens = to_torch(tokens), tgrad = to_torch(grad);
  at::Tensor ta1 = to_torch(a1), tb1 = to_torch(b1), ta4 = to_torch(a4), tb4 = to_torch(b4);
  at::Tensor ta2 = to_torch(a2), tb2 = to_torch(b2), ta2f = to_torch(a2f), tb2f = to_torch(b2f);
  at::Tensor tbuf = torch::empty({N});
  fl::Tensor zeros_m = fl::zeros({S, S});
  at::Tensor tzeros_m = torch::zeros({S, S});
  const double g1 = 2.0 * 1024 * 1024 * 1024, g4 = 2.0 * 4096 * 4096 * 4096, g2 = 2.0 * 2048 * 2048 * 2048;

  std::vector<Case> cases = {
      {"randn 16M", 0, 0, [&] { return fl::randn({N}); }, [&] { return torch::randn({N}); }, false},
      {"uniform_ 16M", 0, 0, [&] { return fl::uniform_(buf); }, [&] { return tbuf.uniform_(); }, false},
      {"cumsum 16M", 0, 0, [&] { return fl::cumsum(x, 0); }, [&] { return tx.cumsum(0); }},
      {"cumsum last dim 4096x4096", 0, 0, [&] { return fl::cumsum(m, -1); }, [&] { return tm.cumsum(-1); }},
      {"sort 1M", 0, 0, [&] { return fl::sort(m1).first; }, [&] { return std::get<0>(tm1.sort()); }},
      {"sort last dim 4096x4096", 0, 0, [&] { return fl::sort(m, -1).first; }, [&] { return std::get<0>(tm.sort(-1)); }},
      {"topk k=50 of 64x131072", 0, 0, [&] { return fl::topk(wide, 50).first; }, [&] { return std::get<0>(twide.topk(50)); }},
      {"gather 16M (dim 1)", 0, 0, [&] { return fl::gather(m, 1, gidx); }, [&] { return tm.gather(1, tgidx); }},
      {"scatter_add 16M (dim 1)", 0, 0, [&] { return fl::scatter_add(zeros_m, 1, gidx, m); },
       [&] { return tzeros_m.scatter_add(1, tgidx, tm); }},
      {"index_select 8192 rows of 50257x768", 0, 0, [&] { return fl::index_select(table, 0, tokens); },
       [&] { return ttable.index_select(0, ttokens); }},
      {"embedding backward V=50257 D=768 8192 tokens", 0, 0,
       [&] { return fl::embedding_dense_backward(grad, tokens, 50257); },
       [&] { return at::embedding_dense_backward(tgrad, ttokens, 50257, -1, false); }},
      {"matmul 1024^3 fp32", g1, 0, [&] { return fl::mm(a1, b1); }, [&] { return ta1.mm(tb1); }},
      {"matmul 4096^3 fp32", g4, 3, [&] { return fl::mm(a4, b4); }, [&] { return ta4.mm(tb4); }},
      {"matmul 2048^3 fp32 (bf16 baseline)", g2, 3, [&] { return fl::mm(a2f, b2f); }, [&] { return ta2f.mm(tb2f); }},
      {"matmul 2048^3 bf16", g2, 1, [&] { return fl::mm(a2, b2); }, [&] { return ta2.mm(tb2); }},
  };

  std::printf("bf16 matmul backend: %s\n\n", fl::bf16_matmul_backend());
  std::printf("| op | threads | flambeau ms | torch ms | torch/flambeau | flambeau GFLOP/s | max abs diff |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int threads : {1, 2}) {
    fl::set_num_threads(threads);
    at::set_num_threads(threads);
    for (const Case& c : cases) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const double diff = c.compare ? max_diff(c.f(), c.t()) : NAN;
      const bench::Pair p = bench::time_pair([&] { c.f(); }, [&] { c.t(); }, c.reps ? c.reps : reps,
                                                c.reps == 1 ? 0 : c.reps ? 1 : 3);
      std::printf("| %s | %d | %.3f | %.3f | %.2f | ", c.name.c_str(), threads, p.flambeau_s * 1e3, p.torch_s * 1e3,
                  p.torch_s / p.flambeau_s);
      if (c.flops > 0) std::printf("%.1f | ", c.flops / p.flambeau_s / 1e9);
      else std::printf("- | ");
      if (c.compare) std::printf("%.2g |\n", diff);
      else std::printf("- |\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
