// flambeau-gpt: settings round trip and --help, the fortunes loader and batches, the schedule,
// the loss plot's smoothing, the document mask (packed documents give what each gives alone),
// and resume: N steps, a checkpoint, M more (on another thread count) equal N + M
// uninterrupted steps bitwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/io/safetensors.h"
#include "gpt/checkpoint.h"
#include "gpt/config.h"
#include "gpt/data.h"
#include "gpt/gpt.h"
#include "gpt/model.h"
#include "gpt/report.h"
#include "test_util.h"

using namespace flambeau;
using flambeau::testing::all_close;
using flambeau::testing::values;
namespace fs = std::filesystem;

namespace {

// A directory with two fortune files (and a .dat file the loader must skip).
fs::path make_corpus() {
  const fs::path dir = fs::temp_directory_path() / ("flb_gpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream a(dir / "alpha"), b(dir / "beta"), dat(dir / "alpha.dat");
  for (int i = 0; i < 30; ++i) a << "Fortune number " << i << " of alpha.\n  -- someone\n%\n";
  for (int i = 0; i < 12; ++i) b << "A beta saying, " << i << ".\n%\n";
  dat << "binary";
  return dir;
}

gpt::Config tiny(const fs::path& data, const fs::path& out) {
  gpt::Config c;
  c.n_layer = 2, c.n_head = 2, c.d_model = 32, c.seq_len = 32, c.batch_size = 2;
  c.steps = 6, c.warmup = 2, c.eval_every = 3, c.eval_batches = 1, c.checkpoint_every = 100;
  c.data_dir = data.string(), c.out_dir = out.string();
  return c;
}

}  // namespace

TEST(Gpt, SettingsRoundTripAndChecks) {
  gpt::Config c;
  gpt::set_option(c, "lr", "0.001");
  gpt::set_option(c, "out_dir", "x/y");
  gpt::set_option(c, "n_layer", "3");
  gpt::Config d;
  gpt::from_text(d, gpt::to_text(c) + "# a comment\n\n");
  EXPECT_EQ(gpt::to_text(c), gpt::to_text(d));
  EXPECT_EQ(d.lr, 0.001);
  EXPECT_EQ(d.n_layer, 3);
  EXPECT_EQ(d.out_dir, "x/y");
  EXPECT_THROW(gpt::set_option(c, "nope", "1"), std::invalid_argument);
  EXPECT_THROW(gpt::set_option(c, "n_layer", "3x"), std::invalid_argument);
  c.d_model = 256, c.n_head = 3;  // 256 % 3 != 0
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

TEST(Gpt, FortunesSplitAndBatches) {
  const fs::path dir = make_corpus();
  const gpt::Corpus corpus = gpt::load_fortunes(dir.string());
  EXPECT_EQ(corpus.files, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(corpus.train.documents + corpus.val.documents, 42);
  EXPECT_EQ(corpus.val.documents, 2);  // fortunes 20 and 40
  EXPECT_EQ(corpus.train.tokens[0], gpt::kDocStart);
  EXPECT_EQ(std::string(corpus.train.tokens.begin() + 1, corpus.train.tokens.begin() + 18), "Fortune number 0 ");
  const gpt::Batch b = gpt::train_batch(corpus.train, 3, 16, 7, 5);
  const gpt::Batch again = gpt::train_batch(corpus.train, 3, 16, 7, 5);
  EXPECT_TRUE(flambeau::testing::bitwise_equal(b.inputs, again.inputs));
  // Targets are the inputs shifted by one.
  EXPECT_TRUE(flambeau::testing::bitwise_equal(b.inputs.narrow(1, 1, 15), b.targets.narrow(1, 0, 15)));
  EXPECT_GT(gpt::unigram_entropy_nats(corpus.train), 2.0);
  fs::remove_all(dir);
}

TEST(Gpt, LearningRateWarmsUpThenDecays) {
  gpt::Config c;
  c.lr = 1e-3, c.min_lr = 1e-4, c.warmup = 10, c.steps = 110;
  EXPECT_DOUBLE_EQ(gpt::learning_rate(c, 0), 1e-4);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(c, 9), 1e-3);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(c, 10), 1e-3);
  EXPECT_NEAR(gpt::learning_rate(c, 60), 5.5e-4, 1e-12);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(c, 110), 1e-4);
}

TEST(Gpt, PackedDocumentsSeeOnlyThemselves) {
  gpt::Config c = tiny("", "");
  gpt::Gpt model(c);
  Generator gen(3);
  const Tensor a = randint(1, 256, {1, 10}, kInt64, gen), b = randint(1, 256, {1, 22}, kInt64, gen);
  const Tensor packed = cat({a, b}, 1);
  const Tensor docs = cat({zeros({1, 10}, kInt64), ones({1, 22}, kInt64)}, 1);
  const Tensor h = model.hidden(packed, docs);
  const Tensor ha = model.hidden(a, zeros({1, 10}, kInt64)), hb = model.hidden(b, zeros({1, 22}, kInt64));
  // Rotary embeddings are relative, so each document's states do not depend on where it sits.
  EXPECT_TRUE(all_close(values(h.narrow(1, 0, 10)), values(ha), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(values(h.narrow(1, 10, 22)), values(hb), 1e-4, 1e-5));
}

// Resuming on another thread count, both ways: 2 -> 1 and 1 -> 2 threads (1 -> 2 once
// caught OpenBLAS running multi-threaded after set_num_threads raised the OpenMP count).
// Likewise with --dtype bf16, whose weights and AdamW state stay float32.
TEST(Gpt, ResumeEqualsUninterruptedBitwise) {
  const int threads = get_num_threads();
  for (const std::string dtype : {"fp32", "bf16"})
  for (const int before : {2, 1}) {
    set_num_threads(before);
    const fs::path data = make_corpus();
    const fs::path straight = data / "straight", split = data / "split";
    auto tiny_as = [&](const fs::path& out) {
      gpt::Config c = tiny(data, out);
      c.dtype = dtype;
      return c;
    };
    gpt::train(tiny_as(straight), "");
    gpt::Config first = tiny_as(split);
    first.stop_at = 3;
    gpt::train(first, "");
    gpt::Config rest = tiny_as(split);
    rest.threads = 3 - before;
    const std::string ckpt = (split / "ckpt.safetensors").string();
    EXPECT_EQ(gpt::read_checkpoint(ckpt).step, 3);
    gpt::train(rest, ckpt);
    const auto a = io::load((straight / "ckpt.safetensors").string()), b = io::load(ckpt);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_TRUE(flambeau::testing::bitwise_equal(a[i].second, b[i].second))
          << a[i].first << ", " << dtype << ", " << before << " then " << 3 - before << " threads";
      if (a[i].second.is_floating_point()) EXPECT_EQ(a[i].second.dtype(), kFloat32) << a[i].first;
    }
    // The log holds every step once, and the plot was written.
    std::ifstream log(split / "log.jsonl");
    int lines = 0;
    for (std::string l; std::getline(log, l);) ++lines;
    EXPECT_EQ(lines, 6 + 2);  // 6 steps, 2 validations
    EXPECT_TRUE(fs::exists(split / "loss.svg"));
    fs::remove_all(data);
  }
  set_num_threads(threads);
}

// Sampling's path (one token at a time through the KV cache and the decode kernel) gives the
// logits of the full forward pass at every position.
TEST(Gpt, DecodeStepsMatchTheFullForward) {
  gpt::Config c = tiny("", "");
  c.window = 5;  // the cache must also apply the sliding window
  gpt::Gpt model(c);
  Generator gen(5);
  const Tensor tokens = randint(1, 256, {1, 12}, kInt64, gen);
  const Tensor full = nn::functional::linear(model.hidden(tokens, zeros({1, 12}, kInt64)), model.wte->weight);
  gpt::KVCache cache = model.new_cache(c.seq_len);
  for (int64_t t = 0; t < 12; ++t) {
    const Tensor step = model.decode_step(tokens.data<int64_t>()[t], cache);
    EXPECT_TRUE(all_close(values(step), values(full.select(1, t).reshape({-1})), 1e-4, 1e-5)) << "position " << t;
  }
}

// sample --graph: the captured decode step replays decode_step_static's bits at every
// position (the graph reads the token and position written into its static inputs), and the
// static step (attention over the whole cache, masked) tracks decode_step (over the
// positions written) to float32 rounding.
TEST(Gpt, GraphedDecodeReplaysTheStaticStepBitwise) {
  gpt::Config c = tiny("", "");
  c.window = 5;
  gpt::Gpt model(c);
  model.eval();
  Generator gen(6);
  const Tensor tokens = randint(1, 256, {1, 12}, kInt64, gen);
  gpt::GraphedDecode graphed(model, c.seq_len);
  const graphs::GraphData data = graphed.graph().get_graph_data();
  EXPECT_GT(data.nodes.size(), 10u);
  gpt::KVCache fixed = model.new_cache(c.seq_len), growing = model.new_cache(c.seq_len);
  const Tensor token = zeros({1, 1}, kInt64), pos = zeros({1}, kInt64);
  for (int64_t t = 0; t < 12; ++t) {
    const int64_t id = tokens.data<int64_t>()[t];
    const Tensor replayed = graphed.step(id).clone();
    token.data<int64_t>()[0] = id;
    pos.data<int64_t>()[0] = t;
    const Tensor eager = model.decode_step_static(token, pos, fixed);
    ASSERT_EQ(replayed.sizes(), eager.sizes());
    EXPECT_EQ(std::memcmp(replayed.data_ptr(), eager.data_ptr(), size_t(eager.numel()) * 4), 0) << "position " << t;
    const Tensor reference = model.decode_step(id, growing);
    EXPECT_TRUE(all_close(values(eager), values(reference), 1e-4, 1e-5)) << "position " << t;
  }
  EXPECT_EQ(graphed.length(), 12);
}

// --dtype bf16 tracks float32 training. Each GEMM of a block rounds its two operands to bf16
// (relative 2^-8 each, products summed in float32), so a GEMM's output moves by at most about
// 2 * 2^-8 of the sum of |products|; the 4 n_layer GEMMs on the way to the logits add up to
// a relative change of the hidden state, and so of the logits and the loss, of at most
// 8 n_layer 2^-8 (cancellation aside). Loss and gradient norm are held to that at the first
// step and, with Adam moving each weight by at most lr per step, over a few more.
TEST(Gpt, Bf16TracksFloat32) {
  const fs::path data = make_corpus();
  const gpt::Corpus corpus = gpt::load_fortunes(data.string());
  gpt::Config c32 = tiny(data, data / "out"), c16 = c32;
  c16.dtype = "bf16";
  gpt::Gpt m32(c32), m16(c16);
  optim::AdamOptions o;
  o.lr = 1e-3;
  optim::AdamW opt32(m32.parameters(), o), opt16(m16.parameters(), o);
  const double bound = 8.0 * double(c32.n_layer) * std::ldexp(1.0, -8);
  for (int64_t step = 0; step < 4; ++step) {
    const gpt::Batch b = gpt::train_batch(corpus.train, c32.batch_size, c32.seq_len, c32.seed, step);
    const Tensor l32 = m32.loss(b.inputs, b.targets, b.doc_ids, c32.z_loss);
    const Tensor l16 = m16.loss(b.inputs, b.targets, b.doc_ids, c16.z_loss);
    ASSERT_EQ(l16.dtype(), kFloat32);
    EXPECT_NEAR(l16.item<double>(), l32.item<double>(), bound * l32.item<double>()) << "step " << step;
    opt32.zero_grad(), opt16.zero_grad();
    l32.backward(), l16.backward();
    const std::vector<Tensor> p32 = m32.parameters(), p16 = m16.parameters();
    double diff = 0, norm = 0, bits_differ = 0;
    for (size_t i = 0; i < p32.size(); ++i) {
      ASSERT_EQ(p16[i].dtype(), kFloat32);
      ASSERT_EQ(p16[i].grad().dtype(), kFloat32);
      const auto g32 = values(p32[i].grad()), g16 = values(p16[i].grad());
      for (size_t j = 0; j < g32.size(); ++j) diff += (g16[j] - g32[j]) * (g16[j] - g32[j]), norm += g32[j] * g32[j];
      bits_differ += !flambeau::testing::bitwise_equal(p32[i].grad(), p16[i].grad());
    }
    EXPECT_LE(std::sqrt(diff), 2 * bound * std::sqrt(norm)) << "step " << step;
    EXPECT_GT(bits_differ, 0);  // the bf16 path did run
    opt32.step(), opt16.step();
  }
  for (const auto& state : opt16.state_dict().params)
    for (const auto& [name, t] : state) EXPECT_EQ(t.dtype(), kFloat32) << name;
  fs::remove_all(data);
}

// The op hook sees exactly the user-level ops of a training step: the model's forward as the
// code above writes it (its fused ops included), backward, clipping and AdamW as one op each.
TEST(Gpt, OpHookSeesTheStepsUserLevelOps) {
  const fs::path data = make_corpus();
  const gpt::Corpus corpus = gpt::load_fortunes(data.string());
  gpt::Config c = tiny(data, data / "out");
  c.grad_clip = 1.0;
  gpt::Gpt model(c);
  optim::AdamOptions o;
  optim::AdamW opt(model.parameters(), o);
  const gpt::Batch b = gpt::train_batch(corpus.train, c.batch_size, c.seq_len, c.seed, 0);
  std::vector<std::string> seen;
  const int id = op_hook::add_listener([&](const op_hook::OpCall& call) { seen.emplace_back(call.name); });
  gpt::train_step(model, opt, b, c);
  op_hook::remove_listener(id);
  std::vector<std::string> want{"document_mask", "create_block_mask", "embedding"};
  for (int64_t i = 0; i < c.n_layer; ++i)
    for (const char* op : {"rms_norm", "gpt::qkv_rope", "flex_attention", "transpose", "reshape", "linear", "add",
                           "rms_norm", "gpt::swiglu", "linear", "add"})
      want.emplace_back(op);
  for (const char* op : {"rms_norm", "reshape", "reshape", "linear_cross_entropy", "backward", "clip_grad_norm_",
                         "_fused_adamw_"})
    want.emplace_back(op);
  EXPECT_EQ(seen, want);
  // The model calls its layers through their hooks (FSDP and DDP attach there).
  int norms = 0;
  auto handle = model.norm->register_forward_hook(
      [&](nn::Module&, const nn::TensorList&, const Tensor&) -> std::optional<Tensor> { return ++norms, std::nullopt; });
  (void)model.loss(b.inputs, b.targets, b.doc_ids, 0.0);
  EXPECT_EQ(norms, 1);
  fs::remove_all(data);
}

TEST(Gpt, HelpListsEverySettingWithItsDefault) {
  const std::string help = gpt::settings_help();
  const gpt::Config defaults;
  std::vector<std::string> names = {"stop_at", "prompt", "parallel", "fsdp_reduce_scatter"};  // not in to_text
  std::istringstream text(gpt::to_text(defaults));
  for (std::string line; std::getline(text, line);) names.push_back(line.substr(0, line.find(' ')));
  for (const std::string& name : names) {
    const std::string value = gpt::get_option(defaults, name);
    EXPECT_NE(help.find("  --" + name + " " + (value.empty() ? "\"\"" : value) + " "), std::string::npos) << name;
    EXPECT_TRUE(gpt::is_setting(name)) << name;
  }
  EXPECT_EQ(std::count(help.begin(), help.end(), '\n'), std::ptrdiff_t(names.size()));
  EXPECT_FALSE(gpt::is_setting("nope"));
}

TEST(Gpt, SmoothedLossIsBiasCorrected) {
  const double b = 0.9;
  // A constant comes out unchanged from the first point on (no pull toward 0 or a start).
  for (double v : gpt::smooth_ema({2.5, 2.5, 2.5, 2.5}, b)) EXPECT_NEAR(v, 2.5, 1e-12);
  // By hand: m_t = b m_(t-1) + (1 - b) x_t from 0, divided by 1 - b^t.
  const std::vector<double> x = {4, 2, 1};
  const std::vector<double> s = gpt::smooth_ema(x, b);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_NEAR(s[0], 4, 1e-12);
  EXPECT_NEAR(s[1], (b * 4 + 2) / (1 + b), 1e-12);
  EXPECT_NEAR(s[2], (b * b * 4 + b * 2 + 1) / (1 + b + b * b), 1e-12);
  // A falling curve: the corrected average follows it faster than one started at x_0
  // (the old plot's m_0 = x_0), while staying above it.
  std::vector<double> fall;
  for (int i = 0; i < 50; ++i) fall.push_back(5.5 * std::exp(-0.05 * i) + 1.5);
  const std::vector<double> corrected = gpt::smooth_ema(fall, 0.95);
  double started = fall[0];
  for (size_t i = 1; i < fall.size(); ++i) {
    started = 0.95 * started + 0.05 * fall[i];
    EXPECT_LT(corrected[i], started) << i;
    EXPECT_GT(corrected[i], fall[i]) << i;
  }
  EXPECT_TRUE(gpt::smooth_ema({}, b).empty());
}
