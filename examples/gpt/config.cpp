// Reading and writing flambeau-gpt's settings: one table of (name, field) pairs drives the
// config file, the command line and the copy stored in checkpoints.
#include "config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <variant>

namespace gpt {
namespace {

using Field = std::variant<int64_t Config::*, uint64_t Config::*, double Config::*, std::string Config::*>;
struct Setting {
  const char* name;
  Field field;
  bool model;        // shapes the model
  const char* help;  // one line for --help
};

const std::vector<Setting>& settings() {
  static const std::vector<Setting> s = {
      // model
      {"vocab_size", &Config::vocab_size, true, "vocabulary: 256 byte tokens (more only for benchmarks)"},
      {"n_layer", &Config::n_layer, true, "transformer blocks"},
      {"n_head", &Config::n_head, true, "attention heads per block"},
      {"d_model", &Config::d_model, true, "model width (d_model / n_head: an even head size)"},
      {"seq_len", &Config::seq_len, true, "tokens per training sequence (the context)"},
      {"window", &Config::window, true, "sliding-window attention span in tokens (0: full causal)"},
      {"rope_theta", &Config::rope_theta, true, "rotary embedding base"},
      // training
      {"batch_size", &Config::batch_size, false, "sequences per step (and per validation batch)"},
      {"steps", &Config::steps, false, "training steps (the learning-rate schedule's length)"},
      {"stop_at", &Config::stop_at, false, "end this run after that many steps (0: steps); not stored"},
      {"warmup", &Config::warmup, false, "steps of linear learning-rate warmup"},
      {"lr", &Config::lr, false, "peak learning rate (AdamW), after warmup"},
      {"min_lr", &Config::min_lr, false, "learning rate at the end of the cosine decay"},
      {"weight_decay", &Config::weight_decay, false, "AdamW weight decay"},
      {"beta1", &Config::beta1, false, "AdamW beta1"},
      {"beta2", &Config::beta2, false, "AdamW beta2"},
      {"grad_clip", &Config::grad_clip, false, "clip the gradients' global norm to this (0: off)"},
      {"z_loss", &Config::z_loss, false, "weight of the z-loss (log-sum-exp squared) in training"},
      {"seed", &Config::seed, false, "seed of the weights and of the batch order"},
      {"dtype", &Config::dtype, false, "fp32, or bf16: the blocks' GEMMs on bfloat16 operands"},
      {"eval_every", &Config::eval_every, false, "steps between validation losses (on eval_batches batches)"},
      {"eval_batches", &Config::eval_batches, false, "batches of the periodic validation loss (the first ones)"},
      {"checkpoint_every", &Config::checkpoint_every, false, "steps between checkpoints"},
      {"threads", &Config::threads, false, "threads (0: all cores)"},
      {"parallel", &Config::parallel, false, "none, ddp or fsdp: data-parallel under flambeau-run (global batch_size)"},
      {"fsdp_reduce_scatter", &Config::fsdp_reduce_scatter, false,
       "shared or separate: fsdp's reduce-scatters on the all-gathers' communicator or their own"},
      {"data_dir", &Config::data_dir, false, "directory of fortune files"},
      {"out_dir", &Config::out_dir, false, "where ckpt.safetensors, log.jsonl and loss.svg go"},
      // sampling
      {"num_samples", &Config::num_samples, false, "fortunes to sample"},
      {"max_new_tokens", &Config::max_new_tokens, false, "most bytes per sample (a sample also ends at byte 0)"},
      {"top_k", &Config::top_k, false, "sample among the k most likely bytes (0: all)"},
      {"temperature", &Config::temperature, false, "softmax temperature (0: always the most likely byte)"},
      {"top_p", &Config::top_p, false, "nucleus: sample among the most likely bytes that hold this probability"},
      {"prompt", &Config::prompt, false, "text each sample starts with"},
  };
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Parses all of `text` as T (std::invalid_argument otherwise).
template <class T>
T parse(const std::string& key, const std::string& text) {
  std::istringstream in(text);
  T v{};
  in >> v;
  if (in.fail() || !in.eof()) throw std::invalid_argument("setting '" + key + "': cannot read '" + text + "'");
  return v;
}

}  // namespace

void set_option(Config& c, const std::string& key, const std::string& value) {
  for (const Setting& s : settings()) {
    if (key != s.name) continue;
    std::visit(
        [&](auto field) {
          using T = std::remove_cvref_t<decltype(c.*field)>;
          if constexpr (std::is_same_v<T, std::string>) c.*field = value;
          else c.*field = parse<T>(key, value);
        },
        s.field);
    return;
  }
  throw std::invalid_argument("unknown setting '" + key + "'");
}

std::string get_option(const Config& c, const std::string& key) {
  for (const Setting& s : settings()) {
    if (key != s.name) continue;
    return std::visit(
        [&](auto field) -> std::string {
          using T = std::remove_cvref_t<decltype(c.*field)>;
          if constexpr (std::is_same_v<T, std::string>) return c.*field;
          else {  // shortest text that reads back to the same value
            char buf[32];
            return std::string(buf, std::to_chars(buf, buf + sizeof buf, c.*field).ptr);
          }
        },
        s.field);
  }
  throw std::invalid_argument("unknown setting '" + key + "'");
}

void from_text(Config& c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("line " + std::to_string(n) + ": expected key = value");
    set_option(c, trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
}

void read_config_file(Config& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  from_text(c, text.str());
}

std::string to_text(const Config& c) {
  std::ostringstream out;
  for (const Setting& s : settings()) {
    // prompt: free text (may hold '#'); stop_at, parallel, fsdp_reduce_scatter: for this run only
    const std::string name = s.name;
    if (name == "prompt" || name == "stop_at" || name == "parallel" || name == "fsdp_reduce_scatter") continue;
    out << s.name << " = " << get_option(c, s.name) << "\n";
  }
  return out.str();
}

std::vector<std::string> model_keys() {
  std::vector<std::string> k;
  for (const Setting& s : settings())
    if (s.model) k.push_back(s.name);
  return k;
}

bool is_setting(const std::string& key) {
  for (const Setting& s : settings())
    if (key == s.name) return true;
  return false;
}

std::string settings_help() {
  const Config defaults;
  std::string out;
  for (const Setting& s : settings()) {
    const std::string value = get_option(defaults, s.name);
    std::string head = "  --" + std::string(s.name) + " " + (value.empty() ? "\"\"" : value);
    head.resize(std::max<size_t>(head.size() + 2, 34), ' ');
    out += head + s.help + "\n";
  }
  return out;
}

void Config::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(vocab_size >= 256 && vocab_size <= (int64_t(1) << 31), "vocab_size must be in [256, 2^31] (byte tokens)");
  need(n_layer >= 1 && n_head >= 1 && d_model >= 1, "n_layer, n_head and d_model must be positive");
  need(d_model % n_head == 0 && head_dim() % 2 == 0, "d_model / n_head must be an even integer (rotary embeddings)");
  need(seq_len >= 2 && batch_size >= 1 && steps >= 0 && warmup >= 0, "seq_len >= 2, batch_size >= 1, steps, warmup >= 0");
  need(window >= 0 && stop_at >= 0, "window and stop_at must be >= 0");
  need(lr > 0 && min_lr >= 0 && min_lr <= lr, "need 0 <= min_lr <= lr, lr > 0");
  need(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "beta1 and beta2 must be in [0, 1)");
  need(grad_clip >= 0 && z_loss >= 0 && weight_decay >= 0, "grad_clip, z_loss and weight_decay must be >= 0");
  need(eval_every >= 1 && eval_batches >= 1 && checkpoint_every >= 1, "eval_every, eval_batches, checkpoint_every >= 1");
  need(threads >= 0, "threads must be >= 0");
  need(dtype == "fp32" || dtype == "bf16", "dtype must be fp32 or bf16");
  need(parallel == "none" || parallel == "ddp" || parallel == "fsdp", "parallel must be none, ddp or fsdp");
  need(!compile || parallel == "none", "--compile runs single-process only (parallel = none, not " + parallel + ")");
  need(fsdp_reduce_scatter == "shared" || fsdp_reduce_scatter == "separate",
       "fsdp_reduce_scatter must be shared or separate");
  need(temperature >= 0 && top_p > 0 && top_p <= 1 && top_k >= 0, "temperature >= 0, top_p in (0, 1], top_k >= 0");
  need(num_samples >= 0 && max_new_tokens >= 0, "num_samples and max_new_tokens must be >= 0");
}

}  // namespace gpt
