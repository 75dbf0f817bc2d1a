// flambeau-gpt: train, evaluate and sample a small GPT on the fortunes corpus.
//
//   flambeau-gpt train  [--config FILE] [--resume] [--key value ...]
//   flambeau-gpt eval   [--checkpoint PATH]
//   flambeau-gpt sample [--checkpoint PATH] [--num_samples 4] [--temperature 0.8] ...
//   flambeau-gpt grads  --out FILE [--key value ...]   (loss and gradients of one batch)
//   flambeau-gpt bench  [--fortunes] [--key value ...] (training step time; --fortunes: on the
//                                                      first training batch, packed documents)
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

int usage() {
  std::fprintf(stderr,
               "usage: flambeau-gpt {train|eval|sample|grads|bench} [--config FILE] [--resume] "
               "[--checkpoint PATH] [--out FILE] [--fortunes] [--<setting> VALUE ...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  try {
    std::string config_file, checkpoint, out;
    bool resume = false, fortunes = false;
    std::vector<std::pair<std::string, std::string>> options;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--resume") { resume = true; continue; }
      if (a == "--fortunes") { fortunes = true; continue; }
      if (a.rfind("--", 0) != 0 || i + 1 >= argc) return usage();
      const std::string value = argv[++i];
      if (a == "--config") config_file = value;
      else if (a == "--checkpoint") checkpoint = value;
      else if (a == "--out") out = value;
      else options.emplace_back(a.substr(2), value);
    }
    gpt::Config c;
    auto apply = [&] {
      if (!config_file.empty()) gpt::read_config_file(c, config_file);
      for (const auto& [k, v] : options) gpt::set_option(c, k, v);
    };
    apply();  // out_dir may come from here
    if (checkpoint.empty()) checkpoint = c.out_dir + "/ckpt.safetensors";
    if (cmd == "train" || cmd == "bench") std::fprintf(stderr, "%s\n", flambeau::backends::cpu::capabilities_line().c_str());
    if (cmd == "train") {
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
      if (out.empty()) return usage();
      c.validate();
      gpt::dump_grads(c, out);
    } else if (cmd == "bench") {
      c.validate();
      gpt::bench(c, fortunes);
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flambeau-gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
