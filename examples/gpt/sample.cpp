// Sampling fortunes from a checkpoint: token by token through the KV cache (FlexAttention's
// decode path), with temperature, top-k and top-p (nucleus) filtering.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <cstdio>
#include <numeric>

#include "checkpoint.h"
#include "data.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"
#include "flambeau/profiler/profiler.h"
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
    // One decoder per sample: eager steps on a growing cache, or a captured step replayed.
    KVCache cache;
    std::unique_ptr<GraphedDecode> graphed;
    if (c.graph) graphed = std::make_unique<GraphedDecode>(model, ck.config.seq_len);
    else cache = model.new_cache(ck.config.seq_len);
    auto length = [&] { return graphed ? graphed->length() : cache.length; };
    auto step = [&](int64_t token) { return graphed ? graphed->step(token) : model.decode_step(token, cache); };
    std::string text = c.prompt;
    Tensor logits = step(kDocStart);
    for (unsigned char ch : c.prompt) logits = step(ch);
    for (int64_t i = 0; i < c.max_new_tokens && length() < ck.config.seq_len; ++i) {
      const int64_t t = draw(logits, c, gen);
      if (t == kDocStart) break;  // the fortune ended
      text += char(t);
      logits = step(t);
    }
    std::printf("--- sample %lld ---\n%s%s", (long long)(n + 1), text.c_str(), text.ends_with('\n') ? "" : "\n");
  }
}

void bench_decode(const Config& c) {
  if (c.threads > 0) set_num_threads(int(c.threads));
  Gpt model(c);
  model.init_weights(c.seed);
  model.eval();
  const int64_t n = std::clamp<int64_t>(c.steps, 2, c.seq_len);
  Generator gen(c.seed);
  const Tensor tokens = randint(0, c.vocab_size, {n}, kInt64, gen);
  const int64_t* tok = tokens.data<int64_t>();
  // The median time per token of n tokens fed from position 0, the best of 3 rounds
  // (the first round warms the allocator and the caches up).
  auto per_token = [&](const std::function<void(int64_t)>& reset, const std::function<void(int64_t, int64_t)>& step) {
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      reset(round);
      std::vector<double> times;
      for (int64_t i = 0; i < n; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        step(i, tok[i]);
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      best = std::min(best, times[times.size() / 2]);
    }
    return best;
  };
  KVCache cache;
  const double eager =
      per_token([&](int) { cache = model.new_cache(c.seq_len); }, [&](int64_t, int64_t t) { model.decode_step(t, cache); });
  const Tensor token = zeros({1, 1}, kInt64), pos = zeros({1}, kInt64);
  const double fixed = per_token([&](int) { cache = model.new_cache(c.seq_len); },
                                 [&](int64_t i, int64_t t) {
                                   token.data<int64_t>()[0] = t;
                                   pos.data<int64_t>()[0] = i;
                                   model.decode_step_static(token, pos, cache);
                                 });
  std::unique_ptr<GraphedDecode> graphed;
  const double replay = per_token([&](int) { graphed = std::make_unique<GraphedDecode>(model, c.seq_len); },
                                  [&](int64_t, int64_t t) { graphed->step(t); });
  if (c.profile) {  // where a replayed token's time goes, per kernel (stderr)
    profiler::start({});
    for (int64_t i = 0; i < 20 && graphed->length() < c.seq_len; ++i) graphed->step(tok[i]);
    std::fprintf(stderr, "%s\n", profiler::table(profiler::key_averages(profiler::stop(), false), "self_cpu_time_total", 30).c_str());
  }
  std::printf("{\"eager_ms\": %.4f, \"static_ms\": %.4f, \"graph_ms\": %.4f, \"tokens\": %lld, \"nodes\": %zu, "
              "\"threads\": %d}\n",
              eager * 1e3, fixed * 1e3, replay * 1e3, (long long)n, graphed->graph().get_graph_data().nodes.size(),
              get_num_threads());
}

}  // namespace gpt
