// flambeau-gpt's configuration: model shape, training and sampling settings, read from a
// config file of `key = value` lines (# comments) and then from --key value options.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct Config {
  // model
  int64_t vocab_size = 256;  // byte tokens (more only for benchmarks); byte 0 starts every fortune
  int64_t n_layer = 4, n_head = 4, d_model = 192, seq_len = 256;
  int64_t window = 0;          // sliding-window attention span (0: none)
  double rope_theta = 10000;
  // training
  int64_t batch_size = 8, steps = 900, warmup = 40;
  int64_t stop_at = 0;  // end this run after that many steps (0: steps); not stored
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, grad_clip = 1.0;
  double z_loss = 1e-4;
  // "fp32", or "bf16": float32 weights and AdamW state, the GEMMs of the blocks on bfloat16
  // operands with float32 accumulation and float32 results.
  std::string dtype = "fp32";
  uint64_t seed = 1337;
  int64_t eval_every = 150, eval_batches = 16, checkpoint_every = 300, threads = 0;  // 0: all cores
  // "none", "ddp" or "fsdp": data-parallel over the processes flambeau-run starts
  // (batch_size is the global batch, split over the ranks; fsdp also shards the parameters
  // and the optimizer state); not stored, so a run resumes on any world size and mode.
  std::string parallel = "none";
  // fsdp: "shared" or "separate": reduce-scatters on their own communicator, beside the
  // all-gathers (FSDP2's set_separate_reduce_scatter_group); not stored.
  std::string fsdp_reduce_scatter = "shared";
  std::string data_dir = "/usr/share/games/fortunes";
  std::string out_dir = "out/gpt";
  // sampling
  int64_t num_samples = 4, max_new_tokens = 400, top_k = 0;
  double temperature = 0.8, top_p = 0.95;
  std::string prompt;
  // --compile: the blocks run compiled (Gpt::compile); not stored.
  bool compile = false;
  // --graph: sample and bench-decode replay a captured decode step (GraphedDecode); not stored.
  bool graph = false;
  // --profile: bench times the training step with the profiler collecting; not stored.
  bool profile = false;

  int64_t head_dim() const { return d_model / n_head; }
  int64_t mlp_hidden() const { return (d_model * 8 / 3 + 63) / 64 * 64; }  // SwiGLU, rounded to 64
  // Raises std::invalid_argument naming the setting when one is out of range.
  void validate() const;
};

// Sets one setting by name from text (std::invalid_argument for unknown names or values).
void set_option(Config& c, const std::string& key, const std::string& value);
// The text of one setting (std::invalid_argument for unknown names).
std::string get_option(const Config& c, const std::string& key);
// Applies a config file (key = value lines).
void read_config_file(Config& c, const std::string& path);
// The settings as `key = value` lines (the config file format; stored in checkpoints).
std::string to_text(const Config& c);
// Applies `text` in the config file format.
void from_text(Config& c, const std::string& text);
// Whether `key` names a setting.
bool is_setting(const std::string& key);
// One line per setting for --help: `--name default` and what it does.
std::string settings_help();
// The names of the settings that shape the model (must match when resuming or sampling).
std::vector<std::string> model_keys();

}  // namespace gpt
