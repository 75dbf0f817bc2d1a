// Random sampling: uniform_, normal_, exponential_, bernoulli, randint, randperm,
// multinomial and the rand/randn factories. Element i of an op's output always comes from
// Philox block (offset + i / per_block) of its generator (see core/generator.h), so a seed
// gives the same tensor on any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/core/generator.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd_random.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// Calls chunk(words, first, count) on runs of elements [first, first + count), where
// `words` holds the Philox words of the blocks those elements come from (`per_block`
// elements per block of 4 words). Runs are spread over threads; the words do not depend on
// how.
template <class F>
void for_random_words(int64_t n, int per_block, std::optional<Generator> gen, const F& chunk) {
  if (n == 0) return;
  Generator& g = gen ? *gen : default_generator();
  const int64_t blocks = (n + per_block - 1) / per_block;
  std::array<uint32_t, 2> key;
  const uint64_t base = g.reserve(uint64_t(blocks), &key);
  constexpr int64_t kRun = 512;  // blocks per run
  parallel_for(0, (blocks + kRun - 1) / kRun, 8, [&](int64_t b, int64_t e) {
    alignas(64) uint32_t words[4 * kRun];
    for (int64_t r = b; r < e; ++r) {
      const int64_t first_block = r * kRun, nb = std::min(kRun, blocks - first_block);
      kernels::philox_words(base + uint64_t(first_block), key, words, nb);
      const int64_t first = first_block * per_block;
      chunk(static_cast<const uint32_t*>(words), first, std::min(nb * per_block, n - first));
    }
  });
}

// Fills out[0, n) with f(block_words, lane, i) for element i (lane: its place in the block).
template <class T, class F>
void fill_random(T* out, int64_t n, int per_block, std::optional<Generator> gen, const F& f) {
  for_random_words(n, per_block, gen, [&](const uint32_t* words, int64_t first, int64_t count) {
    for (int64_t j = 0; j < count; ++j) out[first + j] = f(words + 4 * (j / per_block), int(j % per_block), first + j);
  });
}

// [0, 1) with 53 random bits, from two words.
inline double uniform_f64(uint32_t hi, uint32_t lo) { return double(((uint64_t(hi) << 32) | lo) >> 11) * 0x1p-53; }

// Generates into a contiguous tensor of `compute` dtype, then copies into t if needed.
template <class F>
Tensor& fill_into(Tensor& t, DType compute, const F& fill) {
  if (t.is_contiguous() && t.dtype() == compute) {
    fill(t);
    return t;
  }
  Tensor tmp = empty(t.sizes(), compute);
  fill(tmp);
  return t.copy_(tmp);
}

DType float_compute(const char* op, const Tensor& t) {
  FLB_CHECK(is_floating(t.dtype()), TypeError, "[", op, "] expected a floating point tensor, got ", dtype_name(t.dtype()));
  return t.dtype() == kFloat64 ? kFloat64 : kFloat32;
}

// The largest value of a 16-bit float dtype below `to`: float32 draws just under `to` may
// round up to it in the narrower type, and uniform_ promises [from, to).
double below_in(double to, DType dt) {
  Tensor x = scalar_tensor(to, dt);
  const double v = x.item<double>();
  if (v < to) return v;
  uint16_t bits;
  std::memcpy(&bits, x.data_ptr(), 2);
  bits = v > 0 ? uint16_t(bits - 1) : v < 0 ? uint16_t(bits + 1) : uint16_t(0x8001);
  std::memcpy(x.data_ptr(), &bits, 2);
  return x.item<double>();
}

// Box-Muller: lane pairs (2k, 2k+1) share two uniforms; u1 in (0, 1] keeps log finite.
template <class T>
T box_muller(double u1, double u2, bool odd) {
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1)), theta = 2.0 * M_PI * u2;
  return T(odd ? r * std::sin(theta) : r * std::cos(theta));
}

// An in-place sampler on a tensor that needs grad: the sample is drawn into a new tensor
// and given to t with a zero gradient (PyTorch's UniformBackward and kin); leaves that
// require grad are refused.
template <class F>
Tensor& sample_with_grad(const char* op, const char* node, Tensor& t, const F& sample) {
  autograd::check_inplace_allowed(op, t);
  Tensor r = empty(t.sizes(), t.dtype());
  sample(r);
  autograd::record_zero_grad(node, t, r);
  return autograd::assign_with_grad(op, t, r);
}

}  // namespace

FLB_OP(uniform_, (Tensor& t, double from, double to, std::optional<Generator> gen), (t, from, to, gen), Tensor&) {
  FLB_CHECK(from <= to, ValueError, "[uniform_] expects to return a [from, to) range, but found from=", from,
            " > to=", to);
  if (autograd::needs_grad(t))
    return sample_with_grad("uniform_", "UniformBackward0", t, [&](Tensor& r) { uniform_(r, from, to, gen); });
  const DType ct = float_compute("uniform_", t);
  if (is_reduced_float(t.dtype()) && from < to) {
    fill_into(t, ct, [&](Tensor& out) { uniform_(out, from, to, gen); });
    return clamp_(t, {}, below_in(to, t.dtype()));
  }
  return fill_into(t, ct, [&](Tensor& out) {
    const double span = to - from;
    if (ct == kFloat64) {
      fill_random(out.data<double>(), out.numel(), 2, gen, [&](const uint32_t* w, int lane, int64_t) {
        const double v = from + span * uniform_f64(w[2 * lane], w[2 * lane + 1]);
        return v < to ? v : std::nextafter(to, from);
      });
    } else {
      const float f = float(from), s = float(span), tf = float(to);
      const float below = from == to ? tf : std::nextafter(tf, f);  // keeps results below `to`
      float* o = out.data<float>();
      for_random_words(out.numel(), 4, gen, [&](const uint32_t* w, int64_t first, int64_t count) {
        kernels::uniform_f32(w, o + first, count, f, s, below);
      });
    }
  });
}

FLB_OP(normal_, (Tensor& t, double mean, double std, std::optional<Generator> gen), (t, mean, std, gen), Tensor&) {
  FLB_CHECK(std >= 0, ValueError, "[normal_] expects std >= 0.0, but found std ", std);
  if (autograd::needs_grad(t))
    return sample_with_grad("normal_", "NormalBackward0", t, [&](Tensor& r) { normal_(r, mean, std, gen); });
  const DType ct = float_compute("normal_", t);
  return fill_into(t, ct, [&](Tensor& out) {
    if (ct == kFloat64) {
      fill_random(out.data<double>(), out.numel(), 2, gen, [&](const uint32_t* w, int lane, int64_t) {
        return mean + std * box_muller<double>(uniform_f64(w[0], w[1]), uniform_f64(w[2], w[3]), lane & 1);
      });
    } else {
      // Word pairs (2j, 2j + 1) of the stream give elements 2j and 2j + 1.
      float* o = out.data<float>();
      for_random_words(out.numel(), 4, gen, [&](const uint32_t* w, int64_t first, int64_t count) {
        kernels::box_muller_f32(w, o + first, count, float(mean), float(std));
      });
    }
  });
}

FLB_OP(exponential_, (Tensor& t, double lambd, std::optional<Generator> gen), (t, lambd, gen), Tensor&) {
  FLB_CHECK(lambd > 0, ValueError, "[exponential_] expects lambda > 0.0, but found lambda=", lambd);
  if (autograd::needs_grad(t))
    return sample_with_grad("exponential_", "ExponentialBackward0", t, [&](Tensor& r) { exponential_(r, lambd, gen); });
  const DType ct = float_compute("exponential_", t);
  return fill_into(t, ct, [&](Tensor& out) {
    // -log(1 - u) / lambda with u in [0, 1): always finite.
    auto sample = [&](const uint32_t* w, int lane, int64_t) {
      return -std::log1p(-uniform_f64(w[2 * lane], w[2 * lane + 1])) / lambd;
    };
    if (ct == kFloat64) fill_random(out.data<double>(), out.numel(), 2, gen, sample);
    else fill_random(out.data<float>(), out.numel(), 2, gen, [&](const uint32_t* w, int lane, int64_t i) { return float(sample(w, lane, i)); });
  });
}

FLB_OP(bernoulli_, (Tensor& t, double p, std::optional<Generator> gen), (t, p, gen), Tensor&) {
  FLB_CHECK(p >= 0 && p <= 1, ValueError, "[bernoulli_] expects p to be in [0, 1], but got p=", p);
  if (autograd::needs_grad(t))
    return sample_with_grad("bernoulli_", "BernoulliBackward2", t, [&](Tensor& r) { bernoulli_(r, p, gen); });
  return fill_into(t, kBool, [&](Tensor& out) {
    fill_random(out.data<bool>(), out.numel(), 2, gen,
                [&](const uint32_t* w, int lane, int64_t) { return uniform_f64(w[2 * lane], w[2 * lane + 1]) < p; });
  });
}

FLB_DIFF_OP(bernoulli, (const Tensor& p, std::optional<Generator> gen), (p, gen), Tensor) {
  float_compute("bernoulli", p);
  const Tensor probs = p.to(kFloat64).contiguous();
  const double* pp = probs.data<double>();
  for (int64_t i = 0; i < probs.numel(); ++i)
    FLB_CHECK(pp[i] >= 0 && pp[i] <= 1, ValueError, "[bernoulli] expects 0 <= p <= 1, but found p=", pp[i],
              " at flat index ", i);
  Tensor out = empty(p.sizes(), kFloat64);
  fill_random(out.data<double>(), out.numel(), 2, gen, [&](const uint32_t* w, int lane, int64_t i) {
    return uniform_f64(w[2 * lane], w[2 * lane + 1]) < pp[i] ? 1.0 : 0.0;
  });
  Tensor r = out.to(p.dtype());
  return r;
}

FLB_OP(rand, (const Dims& shape, DType dtype, std::optional<Generator> gen), (shape, dtype, gen), Tensor) {
  Tensor t = empty(shape, dtype);
  return uniform_(t, 0, 1, std::move(gen));
}

FLB_OP(randn, (const Dims& shape, DType dtype, std::optional<Generator> gen), (shape, dtype, gen), Tensor) {
  Tensor t = empty(shape, dtype);
  return normal_(t, 0, 1, std::move(gen));
}

FLB_OP(randint,
       (int64_t low, int64_t high, const Dims& shape, DType dtype, std::optional<Generator> gen),
       (low, high, shape, dtype, gen), Tensor) {
  FLB_CHECK(low < high, ValueError, "[randint] random_ expects 'from' to be less than 'to', but got from=", low,
            " >= to=", high);
  const uint64_t range = uint64_t(high) - uint64_t(low);
  Tensor out = empty(shape, kInt64);
  int64_t* o = out.data<int64_t>();
  if (range <= (uint64_t(1) << 32)) {
    fill_random(o, out.numel(), 4, gen, [&](const uint32_t* w, int lane, int64_t) {
      return int64_t(uint64_t(low) + w[lane] % range);
    });
  } else {
    fill_random(o, out.numel(), 2, gen, [&](const uint32_t* w, int lane, int64_t) {
      const uint64_t r = (uint64_t(w[2 * lane]) << 32) | w[2 * lane + 1];
      return int64_t(uint64_t(low) + r % range);
    });
  }
  return out.to(dtype);
}

FLB_OP(randint,
       (int64_t high, const Dims& shape, DType dtype, std::optional<Generator> gen),
       (high, shape, dtype, gen), Tensor) {
  return randint(0, high, shape, dtype, std::move(gen));
}

FLB_OP(randperm, (int64_t n, DType dtype, std::optional<Generator> gen), (n, dtype, gen), Tensor) {
  FLB_CHECK(n >= 0, ValueError, "[randperm] n must be non-negative, got ", n);
  // Fisher-Yates: swap i with a uniform j in [0, i], from n - 1 down to 1.
  std::vector<uint64_t> r(static_cast<size_t>(std::max<int64_t>(n, 1)));
  fill_random(r.data(), n, 2, gen,
              [&](const uint32_t* w, int lane, int64_t) { return (uint64_t(w[2 * lane]) << 32) | w[2 * lane + 1]; });
  Tensor out = arange(n);
  int64_t* o = out.data<int64_t>();
  for (int64_t i = n - 1; i > 0; --i) std::swap(o[i], o[int64_t(r[size_t(i)] % uint64_t(i + 1))]);
  return out.to(dtype);
}

FLB_OP(multinomial,
       (const Tensor& probs, int64_t num_samples, bool replacement, std::optional<Generator> gen),
       (probs, num_samples, replacement, gen), Tensor) {
  FLB_CHECK(probs.dim() == 1 || probs.dim() == 2, ValueError, "[multinomial] prob_dist must be 1 or 2 dim, got shape ",
            shape_str(probs.sizes()));
  FLB_CHECK(is_floating(probs.dtype()), TypeError, "[multinomial] only supports floating-point dtypes for input, got ",
            dtype_name(probs.dtype()));
  FLB_CHECK(num_samples > 0, ValueError, "[multinomial] cannot sample n_sample <= 0 samples");
  const Tensor p = probs.reshape({-1, probs.size(-1)}).to(kFloat64).contiguous();
  const int64_t rows = p.size(0), n = p.size(1);
  FLB_CHECK(replacement || num_samples <= n, ValueError, "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement (",
            num_samples, " > ", n, ")");
  const double* pp = p.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t positive = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = pp[r * n + i];
      FLB_CHECK(std::isfinite(v) && v >= 0, ValueError, "[multinomial] probability tensor contains either `inf`, `nan` or element < 0 (row ", r, ")");
      total += v;
      positive += v > 0;
    }
    FLB_CHECK(total > 0, ValueError, "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row ", r);
    FLB_CHECK(replacement || positive >= num_samples, ValueError,
              "[multinomial] invalid multinomial distribution (with replacement=False, not enough non-negative category to sample) in row ", r);
  }
  Dims out_shape = probs.dim() == 1 ? Dims{num_samples} : Dims{rows, num_samples};
  Tensor out = empty(out_shape, kInt64);
  int64_t* o = out.data<int64_t>();
  const int64_t draws = replacement ? num_samples : n;
  std::vector<double> u(static_cast<size_t>(rows * draws));
  fill_random(u.data(), rows * draws, 2, gen,
              [&](const uint32_t* w, int lane, int64_t) { return uniform_f64(w[2 * lane], w[2 * lane + 1]); });
  parallel_for(0, rows, 1, [&](int64_t b, int64_t e) {
    std::vector<double> cdf(static_cast<size_t>(n));
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      const double* row = pp + r * n;
      const double* ur = u.data() + r * draws;
      if (replacement) {
        std::partial_sum(row, row + n, cdf.begin());
        for (int64_t s = 0; s < num_samples; ++s) {
          const double x = ur[s] * cdf[size_t(n - 1)];
          int64_t k = int64_t(std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin());
          while (k > 0 && (k >= n || row[k] == 0)) --k;  // never land on a zero-probability class
          o[r * num_samples + s] = k;
        }
      } else {
        // Exponential races: key_i = -log(u_i) / p_i; the num_samples smallest keys win.
        for (int64_t i = 0; i < n; ++i) cdf[size_t(i)] = row[i] > 0 ? -std::log1p(-ur[i]) / row[i] : INFINITY;
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + num_samples, idx.end(), [&](int64_t a, int64_t c) {
          return cdf[size_t(a)] < cdf[size_t(c)] || (cdf[size_t(a)] == cdf[size_t(c)] && a < c);
        });
        for (int64_t s = 0; s < num_samples; ++s) o[r * num_samples + s] = idx[size_t(s)];
      }
    }
  });
  return out;
}

}  // namespace flambeau
