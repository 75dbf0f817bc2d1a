// Printing like PyTorch's repr: tensor([[1., 2.], [3., 4.]]), dtype suffix when it is
// not a default (float32, int64, bool), summaries with "..." above 1000 elements, 80
// columns. The formatter (integer / fixed / scientific mode, column width) follows
// torch/_tensor_str.py's rules, computed from the elements that are shown.
#include <cmath>
#include <cstdio>
#include <ostream>

#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

constexpr int64_t kThreshold = 1000, kEdge = 3, kLineWidth = 80, kPrecision = 4;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, kPrecision, v);
  return buf;
}

struct Formatter {
  bool floating = false, int_mode = true, sci_mode = false;
  size_t width = 1;

  explicit Formatter(const Tensor& shown) : floating(is_floating(shown.dtype())) {
    const Tensor flat = shown.reshape({-1});
    if (!floating) {
      for (int64_t i = 0; i < flat.numel(); ++i) width = std::max(width, raw(flat[i]).size());
      return;
    }
    const Tensor d = flat.to(kFloat64).contiguous();  // keep the copy alive while v is read
    const double* v = d.data<double>();
    double mn = INFINITY, mx = 0;
    bool any = false;
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (!std::isfinite(v[i]) || v[i] == 0) continue;
      any = true;
      mn = std::min(mn, std::fabs(v[i]));
      mx = std::max(mx, std::fabs(v[i]));
      if (v[i] != std::ceil(v[i])) int_mode = false;
    }
    if (!any) return;
    sci_mode = mx / mn > 1000.0 || mx > 1.0e8 || (!int_mode && mn < 1.0e-4);
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (!std::isfinite(v[i]) || v[i] == 0) continue;
      if (sci_mode) width = std::max(width, fmt("%.*e", v[i]).size());
      else if (int_mode) width = std::max(width, fmt("%.0f", v[i]).size() + 1);
      else width = std::max(width, fmt("%.*f", v[i]).size());
    }
  }

  static std::string raw(const Tensor& e) {
    Scalar s = e.item();
    return s.str();
  }

  std::string format(const Tensor& e) const {
    std::string r;
    if (!floating) {
      r = raw(e);
    } else {
      const double v = e.item<double>();
      if (std::isnan(v)) r = "nan";
      else if (std::isinf(v)) r = v > 0 ? "inf" : "-inf";
      else if (sci_mode) r = fmt("%.*e", v);
      else if (int_mode) r = fmt("%.0f", v) + ".";
      else r = fmt("%.*f", v);
    }
    return r.size() < width ? std::string(width - r.size(), ' ') + r : r;
  }
};

// The elements shown when summarising: the first and last kEdge along every dim.
Tensor summarized(const Tensor& t) {
  if (t.dim() == 0) return t;
  if (t.size(0) > 2 * kEdge) {
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < kEdge; ++i) parts.push_back(summarized(t[i]).unsqueeze(0));
    for (int64_t i = t.size(0) - kEdge; i < t.size(0); ++i) parts.push_back(summarized(t[i]).unsqueeze(0));
    return cat(parts, 0);
  }
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < t.size(0); ++i) parts.push_back(summarized(t[i]).unsqueeze(0));
  return parts.empty() ? t : cat(parts, 0);
}

std::string vector_str(const Tensor& t, int64_t indent, bool summarize, const Formatter& f) {
  std::vector<std::string> data;
  const int64_t n = t.size(0);
  if (summarize && n > 2 * kEdge) {
    for (int64_t i = 0; i < kEdge; ++i) data.push_back(f.format(t[i]));
    data.push_back(" ...");
    for (int64_t i = n - kEdge; i < n; ++i) data.push_back(f.format(t[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) data.push_back(f.format(t[i]));
  }
  const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / int64_t(f.width + 2));
  std::string s = "[";
  for (size_t i = 0; i < data.size(); ++i) {
    if (i) s += int64_t(i) % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
    s += data[i];
  }
  return s + "]";
}

std::string tensor_str(const Tensor& t, int64_t indent, bool summarize, const Formatter& f) {
  if (t.dim() == 0) return f.format(t);
  if (t.dim() == 1) return vector_str(t, indent, summarize, f);
  std::vector<std::string> slices;
  const int64_t n = t.size(0);
  if (summarize && n > 2 * kEdge) {
    for (int64_t i = 0; i < kEdge; ++i) slices.push_back(tensor_str(t[i], indent + 1, summarize, f));
    slices.push_back("...");
    for (int64_t i = n - kEdge; i < n; ++i) slices.push_back(tensor_str(t[i], indent + 1, summarize, f));
  } else {
    for (int64_t i = 0; i < n; ++i) slices.push_back(tensor_str(t[i], indent + 1, summarize, f));
  }
  std::string sep(size_t(t.dim() - 1), '\n');
  sep.insert(sep.begin(), ',');
  sep.append(size_t(indent + 1), ' ');
  std::string s = "[";
  for (size_t i = 0; i < slices.size(); ++i) {
    if (i) s += sep;
    s += slices[i];
  }
  return s + "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = int64_t(prefix.size());
  std::vector<std::string> suffixes;
  std::string body;
  const bool default_dtype = dtype() == kFloat32 || dtype() == kInt64 || dtype() == kBool;
  if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + shape_str(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(std::string("dtype=flambeau.") + dtype_name(dtype()));
    body = "[]";
  } else {
    const bool summarize = numel() > kThreshold;
    Formatter f(summarize ? summarized(*this) : *this);
    body = tensor_str(*this, indent, summarize, f);
    if (!default_dtype) suffixes.push_back(std::string("dtype=flambeau.") + dtype_name(dtype()));
  }
  std::string s = prefix + body;
  const size_t nl = s.rfind('\n');
  size_t last = nl == std::string::npos ? s.size() + 1 + 1 : s.size() - nl + 1;
  for (const std::string& suf : suffixes) {
    if (last + suf.size() + 2 > size_t(kLineWidth)) {
      s += ",\n" + std::string(indent, ' ') + suf;
      last = indent + suf.size();
    } else {
      s += ", " + suf;
      last += suf.size() + 2;
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace flambeau
