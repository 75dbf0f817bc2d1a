// The fortunes corpus as training data: one document per fortune, byte tokens, a fixed
// train/validation split, and batches of packed fixed-length sequences with document ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"

namespace gpt {

// Token 0 opens every document: it is the prompt a sample starts from, and the target
// after a fortune's last byte, so it also marks the end.
inline constexpr int64_t kDocStart = 0;

// A stream of documents laid end to end.
struct TokenStream {
  std::vector<uint8_t> tokens;
  std::vector<int32_t> doc;  // document number of each token
  int64_t documents = 0;
};

struct Corpus {
  TokenStream train, val;
  std::vector<std::string> files;  // the fortune files read, in order
};

// Reads every fortune file in `dir` (sorted by name; *.dat, *.u8 and ascii-art skipped),
// splits them on lines holding "%", and sends every 20th fortune to validation.
Corpus load_fortunes(const std::string& dir);

// One batch: inputs, targets (inputs shifted by one) and document ids, int64 [B, T].
struct Batch {
  flambeau::Tensor inputs, targets, doc_ids;
};

// Batch `step` of a pass over `s` cut into sequences of seq_len + 1 tokens, taken in an
// order shuffled once per epoch from `seed`: a pure function of its arguments, so resuming
// at a step sees the same data.
Batch train_batch(const TokenStream& s, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t step);
// The i-th batch of consecutive sequences (wrapping around), for validation.
Batch eval_batch(const TokenStream& s, int64_t batch_size, int64_t seq_len, int64_t i);

// The entropy of the bytes' unigram distribution in nats: the loss of the best model
// that ignores context.
double unigram_entropy_nats(const TokenStream& s);

}  // namespace gpt
