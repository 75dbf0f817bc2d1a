// flambeau-gpt's subcommands (see main.cpp for the command line).
#pragma once
#include <string>

#include "config.h"
#include "data.h"
#include "flambeau/optim/optim.h"
#include "model.h"

namespace gpt {

// Trains from scratch, or from `resume_from` (a checkpoint path) when not empty.
void train(const Config& c, const std::string& resume_from);
// Mean validation loss of a checkpoint over the whole validation set.
void evaluate(const Config& c, const std::string& checkpoint);
// Prints c.num_samples fortunes sampled from a checkpoint.
void sample(const Config& c, const std::string& checkpoint);
// Loss and every gradient for the first training batch, with the weights and the batch,
// into a safetensors file (the PyTorch reference model checks them).
void dump_grads(const Config& c, const std::string& out);
// Times training steps; prints one JSON line (tokens/s, ms per step, GFLOP/s).
void bench(const Config& c, bool fortunes);
// Prints one JSON line: the median time per token of c.steps decode steps (after a warm-up)
// with Gpt::decode_step, with decode_step_static and with its graph replay (GraphedDecode),
// on a randomly initialised model.
void bench_decode(const Config& c);

class DataParallel;
// One training step on batch b (loss, backward, gradient clipping, AdamW); returns the loss.
// With dp, the gradients are averaged over its ranks (and clipped by their global norm).
flambeau::Tensor train_step(Gpt& model, flambeau::optim::AdamW& opt, const Batch& b, const Config& c,
                            DataParallel* dp = nullptr);

// The learning rate of step `step`: linear warmup, then cosine decay to min_lr.
double learning_rate(const Config& c, int64_t step);

}  // namespace gpt
