// Training, evaluation, the gradient dump for the PyTorch cross-check, and the step-time
// benchmark of flambeau-gpt.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "checkpoint.h"
#include "data.h"
#include "flambeau/autograd/node.h"
#include "flambeau/core/generator.h"
#include "flambeau/core/parallel.h"
#include "flambeau/io/safetensors.h"
#include "flambeau/nn/clip_grad.h"
#include "flambeau/ops/ops.h"
#include "flambeau/profiler/profiler.h"
#include "gpt.h"
#include "model.h"
#include "parallel.h"
#include "report.h"

namespace gpt {
using namespace flambeau;
namespace fs = std::filesystem;

double learning_rate(const Config& c, int64_t step) {
  if (step < c.warmup) return c.lr * double(step + 1) / double(c.warmup);
  const double span = double(std::max<int64_t>(1, c.steps - c.warmup));
  const double t = std::min(1.0, double(step - c.warmup) / span);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(M_PI * t));
}

Tensor train_step(Gpt& model, optim::AdamW& opt, const Batch& b, const Config& c, DataParallel* dp) {
  if (dp) dp->before_forward();
  const Tensor loss = model.loss(b.inputs, b.targets, b.doc_ids, c.z_loss);
  opt.zero_grad();
  loss.backward();
  if (c.grad_clip > 0 && dp) dp->clip_grad_norm(c.grad_clip);
  else if (c.grad_clip > 0) nn::utils::clip_grad_norm_(model.parameters(), c.grad_clip);
  opt.step();
  return loss;
}

namespace {

optim::AdamW make_optimizer(const Config& c, const DataParallel& dp) {
  optim::AdamOptions o;
  o.lr = c.lr, o.beta1 = c.beta1, o.beta2 = c.beta2, o.weight_decay = c.weight_decay;
  return optim::AdamW(dp.parameters(), o);
}

// Note [Two validation losses]
// The periodic validation loss (every eval_every steps, and after the last step) averages
// the first eval_batches batches of the validation split: a fixed sample, cheap and
// comparable from step to step. The final one, printed at the end of `train` and by `eval`,
// averages every full batch of the split. The weights are the same (no dropout, no z-loss in
// either), only the text differs: validation fortunes come from the files in name order, so
// the first 16 batches of 8 x 256 bytes (32 KiB of ~126 KiB) hold only art, computers,
// cookie, debian and definitions, which the model finds harder than the average fortune
// (the main job: 1.8180 on those at step 900, 1.7617 on the whole split).
struct ValLoss {
  double loss = 0;
  int64_t batches = 0, of = 0, tokens = 0;  // batches used, full batches in the split, bytes scored
  // What the loss covers.
  std::string what() const {
    char s[128];
    if (batches < of)
      std::snprintf(s, sizeof s, "first %lld of %lld validation batches, %lld bytes", (long long)batches, (long long)of,
                    (long long)tokens);
    else
      std::snprintf(s, sizeof s, "whole validation split, %lld batch%s, %lld bytes", (long long)batches,
                    batches == 1 ? "" : "es", (long long)tokens);
    return s;
  }
};

// What a validation loss over the first `batches` batches covers (all full ones when <= 0).
ValLoss validation_cover(const TokenStream& val, const Config& c, int64_t batches) {
  ValLoss r;
  r.of = std::max<int64_t>(1, int64_t(val.tokens.size()) / (c.batch_size * c.seq_len));
  r.batches = batches > 0 ? std::min(batches, r.of) : r.of;
  r.tokens = r.batches * c.batch_size * c.seq_len;
  return r;
}

// Mean loss (no z-loss) over the first `batches` validation batches (all full ones when <= 0).
ValLoss validation_loss(Gpt& model, const TokenStream& val, const Config& c, int64_t batches) {
  autograd::NoGradGuard no_grad;
  ValLoss r = validation_cover(val, c, batches);
  double sum = 0;
  for (int64_t i = 0; i < r.batches; ++i) {
    const Batch b = eval_batch(val, c.batch_size, c.seq_len, i);
    sum += model.loss(b.inputs, b.targets, b.doc_ids, 0.0).item<double>();
  }
  r.loss = sum / double(r.batches);
  return r;
}

void use_threads(const Config& c) {
  if (c.threads > 0) set_num_threads(int(c.threads));
}

}  // namespace

void train(const Config& c, const std::string& resume_from) {
  use_threads(c);
  fs::create_directories(c.out_dir);
  const Corpus corpus = load_fortunes(c.data_dir);
  const double unigram = unigram_entropy_nats(corpus.train);
  manual_seed(c.seed);  // the default generator's state is part of the checkpoint
  std::fprintf(stderr, "corpus: %zu files, %lld train / %lld validation fortunes, %zu / %zu bytes\n",
               corpus.files.size(), (long long)corpus.train.documents, (long long)corpus.val.documents,
               corpus.train.tokens.size(), corpus.val.tokens.size());
  auto model = std::make_shared<Gpt>(c);
  if (c.compile) model->compile();
  std::optional<Checkpoint> ck;
  if (!resume_from.empty()) {
    ck = read_checkpoint(resume_from);
    restore(*ck, *model);
  }
  DataParallel dp(c, *model);
  optim::AdamW opt = make_optimizer(c, dp);
  int64_t start = 0;
  if (ck) {
    restore_optimizer(*ck, opt, dp);
    start = ck->step;
    std::fprintf(stderr, "resumed from %s at step %lld\n", resume_from.c_str(), (long long)start);
  }
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  std::fprintf(stderr,
               "model: %lld parameters, %lld layers, d_model %lld, %lld heads, seq_len %lld; %lld threads; rank %d of %d\n",
               (long long)n_params, (long long)c.n_layer, (long long)c.d_model, (long long)c.n_head,
               (long long)c.seq_len, (long long)get_num_threads(), dp.rank(), dp.world());

  const std::string ckpt = c.out_dir + "/ckpt.safetensors", plot = c.out_dir + "/loss.svg";
  const int64_t end = c.stop_at > 0 ? std::min(c.stop_at, c.steps) : c.steps;
  // Every rank trains, evaluates (under fsdp the forward needs all) and saves (gathering
  // the shards); rank 0 logs and writes.
  std::optional<Log> log;
  std::optional<Progress> progress;
  if (dp.is_main()) {
    log.emplace(c.out_dir + "/log.jsonl", start);
    progress.emplace(start, end, c.eval_every);
  }
  const int64_t tokens_per_step = c.batch_size * c.seq_len;
  for (int64_t step = start; step < end; ++step) {
    const double lr = learning_rate(c, step);
    opt.set_lr(lr);
    const Batch b = dp.shard(train_batch(corpus.train, c.batch_size, c.seq_len, c.seed, step));
    const Tensor loss = train_step(*model, opt, b, c, &dp);
    const double value = dp.mean(loss.item<double>());
    if (dp.is_main()) {
      progress->update(step, value, lr, tokens_per_step);
      log->write({step, value, -1, lr, progress->tokens_per_second()});
    }
    const bool last = step + 1 == end;
    if ((step + 1) % c.eval_every == 0 || last) {
      const ValLoss v = validation_loss(*model, corpus.val, c, c.eval_batches);
      if (dp.is_main()) {
        log->write({step, -1, v.loss, 0, 0});
        char line[192];
        std::snprintf(line, sizeof line, "step %lld: val loss %.4f (%s)", (long long)(step + 1), v.loss,
                      v.what().c_str());
        progress->note(line);
      }
    }
    if ((step + 1) % c.checkpoint_every == 0 || last) save_checkpoint(ckpt, *model, opt, step + 1, dp);
  }
  const ValLoss val = validation_loss(*model, corpus.val, c, 0);
  dp.barrier();
  if (!dp.is_main()) return;
  progress->finish();
  const ValLoss periodic = validation_cover(corpus.val, c, c.eval_batches);
  write_loss_svg(plot, log->records(), unigram,
                 periodic.batches < periodic.of ? "validation (first " + std::to_string(periodic.batches) + " batches)"
                                                : "validation (whole split)");
  std::printf("final val loss %.4f nats/byte (%s; byte-unigram entropy %.4f); checkpoint %s; plot %s\n", val.loss,
              val.what().c_str(), unigram, ckpt.c_str(), plot.c_str());
}

void evaluate(const Config& c, const std::string& checkpoint) {
  use_threads(c);
  const Checkpoint ck = read_checkpoint(checkpoint);
  Config mc = ck.config;
  mc.batch_size = c.batch_size;
  Gpt model(mc);
  restore(ck, model);
  if (c.compile) model.compile();
  const Corpus corpus = load_fortunes(c.data_dir);
  const ValLoss v = validation_loss(model, corpus.val, mc, 0);
  std::printf("step %lld: val loss %.4f nats/byte (%s), byte-unigram entropy %.4f\n", (long long)ck.step, v.loss,
              v.what().c_str(), unigram_entropy_nats(corpus.train));
}

// How many nodes of the graph behind `t` are compiled regions' backwards.
int64_t compiled_backward_nodes(const Tensor& t) {
  std::vector<std::shared_ptr<autograd::Node>> todo{t.grad_fn()};
  std::set<const autograd::Node*> seen;
  int64_t n = 0;
  while (!todo.empty()) {
    const std::shared_ptr<autograd::Node> node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    n += node->name() == "CompiledFunctionBackward";
    for (const autograd::Edge& e : node->next) todo.push_back(e.fn);
  }
  return n;
}

void dump_grads(const Config& c, const std::string& out) {
  use_threads(c);
  const Corpus corpus = load_fortunes(c.data_dir);
  Gpt model(c);
  const Batch b = train_batch(corpus.train, c.batch_size, c.seq_len, c.seed, 0);
  if (c.compile) {  // the first call traces (and runs eagerly); the dumped one runs compiled
    model.compile();
    model.loss(b.inputs, b.targets, b.doc_ids, c.z_loss).backward();
    model.zero_grad();
  }
  const Tensor loss = model.loss(b.inputs, b.targets, b.doc_ids, c.z_loss);
  const int64_t compiled = compiled_backward_nodes(loss);
  loss.backward();
  io::TensorList t{{"loss", loss.detach()}, {"inputs", b.inputs}, {"targets", b.targets}, {"doc_ids", b.doc_ids}};
  for (const auto& [name, p] : model.named_parameters()) {
    t.emplace_back("model." + name, p.detach());
    t.emplace_back("grad." + name, p.grad());
  }
  io::save(t, out, {{"config", to_text(c)}, {"compiled_backward_nodes", std::to_string(compiled)}});
}

void bench(const Config& c, bool fortunes) {
  use_threads(c);
  auto model = std::make_shared<Gpt>(c);
  DataParallel dp(c, *model);  // batch_size is the global batch
  optim::AdamW opt = make_optimizer(c, dp);
  // The first training batch (packed fortunes, document masks), or random tokens in one
  // document per row (plain causal attention).
  Batch b;
  if (fortunes) {
    b = train_batch(load_fortunes(c.data_dir).train, c.batch_size, c.seq_len, c.seed, 0);
  } else {
    Generator gen(c.seed);
    b.inputs = randint(0, c.vocab_size, {c.batch_size, c.seq_len}, kInt64, gen);
    b.targets = randint(0, c.vocab_size, {c.batch_size, c.seq_len}, kInt64, gen);
    b.doc_ids = zeros({c.batch_size, c.seq_len}, kInt64);
  }
  b = dp.shard(b);
  if (c.compile) model->compile();
  auto step = [&] { train_step(*model, opt, b, c, &dp); };
  if (c.profile) profiler::start({});  // collecting from the warm-up on; the events are dropped
  const auto w0 = std::chrono::steady_clock::now();
  step();  // warm-up (allocator cache, page faults; the trace and compile with --compile)
  const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const int64_t n = std::max<int64_t>(1, c.steps);
  std::vector<double> times;
  for (int64_t i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (c.profile) (void)profiler::stop();
  std::sort(times.begin(), times.end());
  const double median = dp.mean(times[times.size() / 2]);
  if (!dp.is_main()) return;
  const double flops = train_step_flops(c, c.batch_size, c.seq_len);
  std::printf(
      "{\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"gflops\": %.2f, \"threads\": %d, \"ranks\": %d, "
      "\"first_step_s\": %.3f, \"compiled\": %s, \"profiled\": %s}\n",
      median * 1e3, double(c.batch_size * c.seq_len) / median, flops / median / 1e9, get_num_threads(), dp.world(),
      first, c.compile ? "true" : "false", c.profile ? "true" : "false");
}

}  // namespace gpt
