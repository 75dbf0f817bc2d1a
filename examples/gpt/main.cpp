// flambeau-gpt: train, evaluate and sample a small GPT on the fortunes corpus.
//
//   flambeau-gpt train  [--config FILE] [--resume | --auto-resume] [--key value ...]
//   flambeau-gpt eval   [--checkpoint PATH]
//   flambeau-gpt sample [--checkpoint PATH] [--num_samples 4] [--temperature 0.8] ...
//   flambeau-gpt grads  --out FILE [--key value ...]   (loss and gradients of one batch)
//   flambeau-gpt bench  [--fortunes] [--key value ...] (training step time; --fortunes: on the
//                                                      first training batch, packed documents)
//   flambeau-gpt bench-decode [--key value ...]          (decode step time per token: eager,
//                                                      the static step, its graph replay)
//   add --compile to train, eval, sample or bench to run the blocks compiled (flambeau::compile),
//   --graph to sample to replay a captured decode step, --profile to bench to profile it
//   flambeau-gpt --help                                 (every option and setting, with defaults)
//
// Settings (see config.h) come from the defaults, then a resumed checkpoint, then the
// config file, then the command line. The checkpoint defaults to <out_dir>/ckpt.safetensors.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "flambeau/kernels/cpu/capabilities.h"
#include "config.h"
#include "gpt.h"

namespace {

const char* kUsage =
    "usage: flambeau-gpt {train|eval|sample|grads|bench|bench-decode} [--config FILE] [--resume | --auto-resume] "
    "[--checkpoint PATH] [--out FILE] [--fortunes] [--compile] [--graph] [--profile] [--<setting> VALUE ...]\n";

void help() {
  std::printf(
      "%s\n"
      "Train, evaluate and sample a small byte-level GPT on the fortunes corpus.\n\n"
      "commands:\n"
      "  train    train from scratch (or --resume); writes <out_dir>/ckpt.safetensors, log.jsonl, loss.svg\n"
      "  eval     validation loss of a checkpoint on the whole validation split\n"
      "  sample   print num_samples fortunes sampled from a checkpoint\n"
      "  grads    loss and gradients of the first training batch into --out (the PyTorch cross-check)\n"
      "  bench    median time of a training step, one JSON line\n\n"
      "options:\n"
      "  --config FILE      settings file of `key = value` lines (examples/gpt/fortunes.conf)\n"
      "  --resume           train: continue from the checkpoint (its settings, then --config, then flags)\n"
      "  --auto-resume      train: --resume when the checkpoint exists, else from scratch (runs that\n"
      "                     flambeau-run restarts)\n"
      "  --checkpoint PATH  checkpoint to resume, evaluate or sample (default <out_dir>/ckpt.safetensors)\n"
      "  --out FILE         grads: the safetensors file to write\n"
      "  --fortunes         bench: time the first training batch (packed fortunes), not random tokens\n"
      "  --compile          train, eval, sample, bench: the blocks run compiled (flambeau::compile, cpp\n"
      "                     backend; the forward and its backward); single-process only\n"
      "  --graph            sample: each token replays a captured decode step (flambeau::graphs)\n"
      "  --profile          bench: the training step runs with the profiler collecting; bench-decode:\n"
      "                     prints where a replayed step spends its time\n"
      "  -h, --help         this help\n\n"
      "settings, --<name> VALUE (shown with their defaults; applied in order: defaults, a resumed\n"
      "checkpoint, the --config file, the command line):\n%s",
      kUsage, gpt::settings_help().c_str());
}

// A command-line mistake: the message, the usage line, exit status 2.
int usage_error(const std::string& message) {
  std::fprintf(stderr, "flambeau-gpt: %s\n%s(flambeau-gpt --help lists the commands and settings)\n", message.c_str(),
               kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  auto is_help = [](const std::string& a) { return a == "-h" || a == "--help"; };
  if (argc < 2) return usage_error("no command");
  const std::string cmd = argv[1];
  if (is_help(cmd)) {
    help();
    return 0;
  }
  try {
    std::string config_file, checkpoint, out;
    bool resume = false, auto_resume = false, fortunes = false, compile = false, graph = false,
         profile = false;
    std::vector<std::pair<std::string, std::string>> options;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--resume") { resume = true; continue; }
      if (a == "--auto-resume") { auto_resume = true; continue; }
      if (a == "--fortunes") { fortunes = true; continue; }
      if (a == "--compile") { compile = true; continue; }
      if (a == "--graph") { graph = true; continue; }
      if (a == "--profile") { profile = true; continue; }
      if (is_help(a)) {
        help();
        return 0;
      }
      if (a.rfind("--", 0) != 0) return usage_error("unexpected argument '" + a + "'");
      const std::string key = a.substr(2);
      if (key != "config" && key != "checkpoint" && key != "out" && !gpt::is_setting(key))
        return usage_error("unknown option '" + a + "'");
      if (i + 1 >= argc) return usage_error("option '" + a + "' needs a value");
      const std::string value = argv[++i];
      if (key == "config") config_file = value;
      else if (key == "checkpoint") checkpoint = value;
      else if (key == "out") out = value;
      else options.emplace_back(key, value);
    }
    if (cmd != "train" && cmd != "eval" && cmd != "sample" && cmd != "grads" && cmd != "bench" &&
        cmd != "bench-decode")
      return usage_error("unknown command '" + cmd + "'");
    gpt::Config c;
    auto apply = [&] {
      if (!config_file.empty()) gpt::read_config_file(c, config_file);
      for (const auto& [k, v] : options) gpt::set_option(c, k, v);
      c.compile = compile;
      c.graph = graph;
      c.profile = profile;
    };
    apply();  // out_dir may come from here
    if (checkpoint.empty()) checkpoint = c.out_dir + "/ckpt.safetensors";
    if (cmd == "train" || cmd.rfind("bench", 0) == 0) std::fprintf(stderr, "%s\n", flambeau::backends::cpu::capabilities_line().c_str());
    if (cmd == "train") {
      if (auto_resume && std::filesystem::exists(checkpoint)) resume = true;
      if (resume) {
        if (!std::filesystem::exists(checkpoint)) throw std::invalid_argument("no checkpoint at '" + checkpoint + "' to resume from");
        c = gpt::read_checkpoint(checkpoint).config;
        apply();
      }
      c.validate();
      gpt::train(c, resume ? checkpoint : "");
    } else if (cmd == "eval") {
      gpt::evaluate(c, checkpoint);
    } else if (cmd == "sample") {
      c.validate();
      gpt::sample(c, checkpoint);
    } else if (cmd == "grads") {
      if (out.empty()) return usage_error("grads needs --out FILE");
      c.validate();
      gpt::dump_grads(c, out);
    } else if (cmd == "bench") {
      c.validate();
      gpt::bench(c, fortunes);
    } else if (cmd == "bench-decode") {
      c.validate();
      gpt::bench_decode(c);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flambeau-gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
