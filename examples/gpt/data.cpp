// Loading the fortunes into token streams and cutting them into training batches.
#include "data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "flambeau/ops/ops.h"

namespace gpt {
namespace fs = std::filesystem;
using namespace flambeau;

namespace {

void append(TokenStream& s, const std::string& text) {
  const int32_t id = int32_t(s.documents++);
  s.tokens.push_back(uint8_t(kDocStart));
  s.doc.push_back(id);
  for (unsigned char c : text) {
    s.tokens.push_back(c == kDocStart ? uint8_t(' ') : c);
    s.doc.push_back(id);
  }
}

// Sequence j of length n (wrapping around the stream) as rows of `out` tensors.
void put_sequence(const TokenStream& s, int64_t start, int64_t n, int64_t* in, int64_t* tgt, int64_t* doc) {
  const int64_t size = int64_t(s.tokens.size());
  for (int64_t t = 0; t < n; ++t) {
    const int64_t a = (start + t) % size, b = (start + t + 1) % size;
    in[t] = s.tokens[size_t(a)];
    tgt[t] = s.tokens[size_t(b)];
    doc[t] = s.doc[size_t(a)];
  }
}

Batch make_batch(const TokenStream& s, int64_t batch_size, int64_t seq_len, const std::vector<int64_t>& starts) {
  Batch b{empty({batch_size, seq_len}, kInt64), empty({batch_size, seq_len}, kInt64), empty({batch_size, seq_len}, kInt64)};
  for (int64_t i = 0; i < batch_size; ++i)
    put_sequence(s, starts[size_t(i)], seq_len, b.inputs.data<int64_t>() + i * seq_len,
                 b.targets.data<int64_t>() + i * seq_len, b.doc_ids.data<int64_t>() + i * seq_len);
  return b;
}

}  // namespace

Corpus load_fortunes(const std::string& dir) {
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && ext != ".dat" && ext != ".u8" && name != "ascii-art") paths.push_back(e.path());
  }
  if (ec || paths.empty())
    throw std::runtime_error("no fortune files in '" + dir + "' (install the Debian package 'fortunes')");
  std::sort(paths.begin(), paths.end());
  Corpus c;
  int64_t n = 0;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::string line, text;
    auto flush = [&] {
      if (text.find_first_not_of(" \t\n") != std::string::npos) append(++n % 20 == 0 ? c.val : c.train, text);
      text.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") flush();
      else text += line + "\n";
    }
    flush();
    c.files.push_back(p.filename().string());
  }
  if (c.val.tokens.empty()) throw std::runtime_error("the corpus in '" + dir + "' is too small to split");
  return c;
}

Batch train_batch(const TokenStream& s, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t step) {
  const int64_t n_seq = std::max<int64_t>(1, int64_t(s.tokens.size()) / (seq_len + 1));
  std::vector<int64_t> starts;
  std::vector<int64_t> order;
  int64_t epoch = -1;
  for (int64_t i = 0; i < batch_size; ++i) {
    const int64_t k = step * batch_size + i;
    if (k / n_seq != epoch) {  // the permutation of this epoch
      epoch = k / n_seq;
      order.resize(size_t(n_seq));
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 rng(seed * 1000003 + uint64_t(epoch));
      for (int64_t j = n_seq - 1; j > 0; --j) std::swap(order[size_t(j)], order[size_t(rng() % uint64_t(j + 1))]);
    }
    starts.push_back(order[size_t(k % n_seq)] * (seq_len + 1));
  }
  return make_batch(s, batch_size, seq_len, starts);
}

Batch eval_batch(const TokenStream& s, int64_t batch_size, int64_t seq_len, int64_t i) {
  std::vector<int64_t> starts;
  for (int64_t j = 0; j < batch_size; ++j) starts.push_back((i * batch_size + j) * seq_len);
  return make_batch(s, batch_size, seq_len, starts);
}

double unigram_entropy_nats(const TokenStream& s) {
  std::vector<double> count(256, 0.0);
  for (uint8_t t : s.tokens) count[t] += 1;
  double h = 0, n = double(s.tokens.size());
  for (double c : count)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

}  // namespace gpt
