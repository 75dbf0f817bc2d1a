// Sampling fortunes from a checkpoint: token by token through the KV cache (FlexAttention's
// decode path), with temperature, top-k and top-p (nucleus) filtering.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "checkpoint.h"
#include "data.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"
#include "gpt.h"
#include "model.h"

namespace gpt {
using namespace flambeau;

namespace {

// A token drawn from logits [V] (temperature 0: the most likely one).
int64_t draw(const Tensor& logits, const Config& c, Generator& gen) {
  const Tensor l = logits.to(kFloat64).contiguous();
  const double* x = l.data<double>();
  const int64_t V = l.numel();
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  if (c.temperature == 0) return order[0];
  // Softmax at the temperature over the sorted logits, then keep the top k and the
  // smallest prefix holding top_p of the probability.
  std::vector<double> p(static_cast<size_t>(V));
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += p[size_t(i)] = std::exp((x[order[size_t(i)]] - x[order[0]]) / c.temperature);
  int64_t keep = c.top_k > 0 ? std::min(c.top_k, V) : V;
  double mass = 0;
  for (int64_t i = 0; i < keep; ++i) {
    mass += p[size_t(i)] / sum;
    if (mass >= c.top_p) keep = i + 1;
  }
  const double total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  double u = rand({}, kFloat64, gen).item<double>() * total;
  for (int64_t i = 0; i < keep; ++i)
    if ((u -= p[size_t(i)]) <= 0) return order[size_t(i)];
  return order[size_t(keep - 1)];
}

}  // namespace

void sample(const Config& c, const std::string& checkpoint) {
  if (c.threads > 0) set_num_threads(int(c.threads));
  const Checkpoint ck = read_checkpoint(checkpoint);
  Gpt model(ck.config);
  restore(ck, model);
  model.eval();
  if (c.compile) model.compile();
  Generator gen(c.seed);
  for (int64_t n = 0; n < c.num_samples; ++n) {
    KVCache cache = model.new_cache(ck.config.seq_len);
    std::string text = c.prompt;
    Tensor logits = model.decode_step(kDocStart, cache);
    for (unsigned char ch : c.prompt) logits = model.decode_step(ch, cache);
    for (int64_t i = 0; i < c.max_new_tokens && cache.length < ck.config.seq_len; ++i) {
      const int64_t t = draw(logits, c, gen);
      if (t == kDocStart) break;  // the fortune ended
      text += char(t);
      logits = model.decode_step(t, cache);
    }
    std::printf("--- sample %lld ---\n%s%s", (long long)(n + 1), text.c_str(), text.ends_with('\n') ? "" : "\n");
  }
}

}  // namespace gpt
