// Checkpoints of flambeau-gpt in safetensors, written atomically: the model's parameters
// ("model.<name>"), the AdamW state ("optim.<i>.<step|exp_avg|exp_avg_sq>"), the random
// generator's state ("rng"), and in the metadata the step and the config text.
#pragma once
#include <string>

#include "config.h"
#include "flambeau/optim/optim.h"
#include "model.h"

namespace gpt {

void save_checkpoint(const std::string& path, const Gpt& model, const flambeau::optim::Optimizer* opt, int64_t step);

struct Checkpoint {
  Config config;  // as stored (defaults for what it lacks)
  int64_t step = 0;
  std::string path;
};
// Reads the metadata only (the tensors stay in the file until restore()).
Checkpoint read_checkpoint(const std::string& path);
// Copies the model (and, when given, optimizer) state and the generator's state in. The
// model's shape settings must equal the checkpoint's (std::invalid_argument otherwise).
void restore(const Checkpoint& ckpt, Gpt& model, flambeau::optim::Optimizer* opt);

}  // namespace gpt
