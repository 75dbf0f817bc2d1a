// Saving and restoring flambeau-gpt's training state with flambeau::io (safetensors).
#include "checkpoint.h"

#include <map>
#include <stdexcept>

#include "flambeau/core/generator.h"
#include "flambeau/io/safetensors.h"

namespace gpt {
using namespace flambeau;

void save_checkpoint(const std::string& path, const Gpt& model, const optim::Optimizer& opt, int64_t step,
                     const DataParallel& dp) {
  io::TensorList tensors;
  const std::vector<Tensor> params = dp.parameters();
  size_t i = 0;
  for (const auto& [name, p] : model.named_parameters()) tensors.emplace_back("model." + name, dp.full(i, params[i])), ++i;
  const optim::OptimizerState s = opt.state_dict();
  for (size_t i = 0; i < s.params.size(); ++i)
    for (const auto& [name, t] : s.params[i]) tensors.emplace_back("optim." + std::to_string(i) + "." + name, dp.full(i, t));
  if (!dp.is_main()) return;
  tensors.emplace_back("rng", default_generator().get_state());
  io::save(tensors, path,
           {{"format", "flambeau-gpt/1"}, {"step", std::to_string(step)}, {"config", to_text(model.config)}});
}

Checkpoint read_checkpoint(const std::string& path) {
  io::SafeOpen f(path);
  std::map<std::string, std::string> meta(f.metadata().begin(), f.metadata().end());
  if (meta["format"] != "flambeau-gpt/1") throw std::invalid_argument("'" + path + "' is not a flambeau-gpt checkpoint");
  Checkpoint c;
  c.path = path;
  from_text(c.config, meta["config"]);
  c.step = std::stoll(meta["step"]);
  return c;
}

void restore(const Checkpoint& ckpt, Gpt& model) {
  for (const std::string& k : model_keys())
    if (get_option(ckpt.config, k) != get_option(model.config, k))
      throw std::invalid_argument("checkpoint '" + ckpt.path + "' has " + k + " = " + get_option(ckpt.config, k) +
                                  ", the model " + get_option(model.config, k));
  io::SafeOpen f(ckpt.path);
  nn::StateDict sd;
  for (const auto& [name, t] : model.state_dict()) sd.insert(name, f.get_tensor("model." + name, true));
  model.load_state_dict(sd);
  default_generator().set_state(f.get_tensor("rng", true));
}

void restore_optimizer(const Checkpoint& ckpt, optim::Optimizer& opt, const DataParallel& dp) {
  io::SafeOpen f(ckpt.path);
  optim::OptimizerState s = opt.state_dict();
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].clear();
    for (const char* name : {"step", "exp_avg", "exp_avg_sq"}) {
      const std::string key = "optim." + std::to_string(i) + "." + name;
      if (f.contains(key)) s.params[i][name] = dp.part(i, f.get_tensor(key, true));
    }
  }
  opt.load_state_dict(s);
}

}  // namespace gpt
