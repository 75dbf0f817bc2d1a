// Side-by-side timing helpers: run flambeau and PyTorch alternately, keep medians.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Pair {
  double flambeau_s, torch_s;
};

// Times f and t alternately `reps` times after `warmup` calls each; returns the medians.
inline Pair time_pair(const std::function<void()>& f, const std::function<void()>& t, int reps, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) f(), t();
  std::vector<double> tf, tt;
  for (int i = 0; i < reps; ++i) {
    double a = now_s();
    f();
    double b = now_s();
    t();
    double c = now_s();
    tf.push_back(b - a);
    tt.push_back(c - b);
  }
  return {median(tf), median(tt)};
}

}  // namespace bench
