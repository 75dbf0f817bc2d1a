// Checkpoints of flambeau-gpt in safetensors, written atomically: the model's parameters
// ("model.<name>"), the AdamW state ("optim.<i>.<step|exp_avg|exp_avg_sq>"), the random
// generator's state ("rng"), and in the metadata the step and the config text.
#pragma once
#include <string>

#include "config.h"
#include "flambeau/optim/optim.h"
#include "model.h"
#include "parallel.h"

namespace gpt {

// Every rank calls it (under fsdp the shards are gathered); rank 0 writes. The parameters
// and the optimizer state are whole whatever the world size or mode.
void save_checkpoint(const std::string& path, const Gpt& model, const flambeau::optim::Optimizer& opt, int64_t step,
                     const DataParallel& dp);

struct Checkpoint {
  Config config;  // as stored (defaults for what it lacks)
  int64_t step = 0;
  std::string path;
};
// Reads the metadata only (the tensors stay in the file until restore()).
Checkpoint read_checkpoint(const std::string& path);
// Copies the model's parameters and the generator's state in. The model's shape settings
// must equal the checkpoint's (std::invalid_argument otherwise).
void restore(const Checkpoint& ckpt, Gpt& model);
// Copies the optimizer's state in, each tensor cut to dp's part of it (opt steps
// dp.parameters()).
void restore_optimizer(const Checkpoint& ckpt, flambeau::optim::Optimizer& opt, const DataParallel& dp);

}  // namespace gpt
