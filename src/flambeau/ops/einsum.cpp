// einsum and tensordot, composed of views, sums and bmm (so autograd needs nothing of its
// own). An einsum equation is parsed into labels per operand (the ellipsis becomes one label
// per broadcast dim); repeated labels in an operand take a diagonal; size-1 dims of labels
// sized > 1 elsewhere are squeezed away (broadcasting); a label in one operand only and not
// in the output is summed at once; then operands are contracted pairwise, cheapest pair first
// (or in the order of `path`), each pair as one bmm of [batch, left, k] x [batch, k, right].
#include <algorithm>
#include <map>
#include <numeric>

#include "flambeau/core/op_hook.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// A label is a letter (0-51: A-Z, then a-z) or an ellipsis dim (52 + its index from the left).
constexpr int kEllipsisBase = 52;

int letter_label(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : 26 + (c - 'a'); }
bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// One term's letters in order, with -1 where the ellipsis stands.
struct Term {
  std::vector<int> labels;  // letter labels and at most one -1
  bool ellipsis = false;
};

// Parses one term, s[begin, end): "ab", "b...c".
Term parse_term(const std::string& s, size_t begin, size_t end, size_t operand, bool output) {
  Term t;
  for (size_t i = begin; i < end; ++i) {
    const char c = s[i];
    if (c == '.') {
      const std::string who = output ? std::string("the output") : "operand " + std::to_string(operand);
      FLB_CHECK(i + 3 <= end && s.compare(i, 3, "...") == 0, ValueError, "[einsum] found '.' for ", who,
                " that is not part of any ellipsis");
      FLB_CHECK(!t.ellipsis, ValueError, "[einsum] found '.' for ", who, " for which an ellipsis was already found");
      t.ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      FLB_CHECK(is_letter(c), ValueError, "[einsum] invalid subscript given at index ", i,
                " in the equation string, subscripts must be in [a-zA-Z]");
      t.labels.push_back(letter_label(c));
    }
  }
  return t;
}

struct Operand {
  Tensor t;
  std::vector<int> labels;  // one per dim of t, distinct
};

int64_t product_of_sizes(const std::vector<int>& labels, const std::map<int, int64_t>& size) {
  int64_t p = 1;
  for (int l : labels) p *= size.at(l);
  return p;
}

// Sums the dims of `op` whose labels are not in `keep`.
void sum_out(Operand& op, const std::vector<int>& keep) {
  Dims dims;
  std::vector<int> rest;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (std::find(keep.begin(), keep.end(), op.labels[d]) == keep.end()) dims.push_back(int64_t(d));
    else rest.push_back(op.labels[d]);
  }
  if (dims.empty()) return;
  op.t = sum(op.t, dims);
  op.labels = rest;
}

// The labels still needed after operands `skip_a` and `skip_b` are contracted: those of the
// output and of the other operands.
std::vector<int> needed_labels(const std::vector<Operand>& ops, size_t skip_a, size_t skip_b, const std::vector<int>& out) {
  std::vector<int> need = out;
  for (size_t i = 0; i < ops.size(); ++i)
    if (i != skip_a && i != skip_b) need.insert(need.end(), ops[i].labels.begin(), ops[i].labels.end());
  return need;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// a x b: labels in both and needed later are batch, in both and not needed are contracted,
// the others stay on their side. One bmm of [batch, left, k] x [batch, k, right].
Operand contract(Operand a, Operand b, const std::vector<int>& need, const std::map<int, int64_t>& size) {
  sum_out(a, [&] {
    std::vector<int> keep = need;
    keep.insert(keep.end(), b.labels.begin(), b.labels.end());
    return keep;
  }());
  sum_out(b, [&] {
    std::vector<int> keep = need;
    keep.insert(keep.end(), a.labels.begin(), a.labels.end());
    return keep;
  }());
  std::vector<int> batch, left, right, k;
  for (int l : a.labels) (contains(b.labels, l) ? (contains(need, l) ? batch : k) : left).push_back(l);
  for (int l : b.labels)
    if (!contains(a.labels, l)) right.push_back(l);
  auto permuted = [](const Operand& op, std::initializer_list<const std::vector<int>*> groups) {
    Dims perm;
    for (const auto* g : groups)
      for (int l : *g) perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
    return op.t.permute(perm);
  };
  const int64_t nb = product_of_sizes(batch, size), nl = product_of_sizes(left, size),
                nr = product_of_sizes(right, size), nk = product_of_sizes(k, size);
  const Tensor x = permuted(a, {&batch, &left, &k}).reshape({nb, nl, nk});
  const Tensor y = permuted(b, {&batch, &k, &right}).reshape({nb, nk, nr});
  Dims shape;
  std::vector<int> labels;
  for (const auto* g : {&batch, &left, &right})
    for (int l : *g) shape.push_back(size.at(l)), labels.push_back(l);
  return {bmm(x, y).reshape(shape), labels};
}

}  // namespace

FLB_OP(einsum, (const std::string& equation, const std::vector<Tensor>& tensors, const std::optional<Dims>& path),
       (equation, tensors, path), Tensor) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t begin = 0;;) {
    const size_t comma = std::min(lhs.find(',', begin), lhs.size());
    terms.push_back(parse_term(lhs, begin, comma, terms.size(), false));
    if (comma == lhs.size()) break;
    begin = comma + 1;
  }
  FLB_CHECK(terms.size() == tensors.size(), ValueError, "[einsum] ", terms.size() > tensors.size() ? "fewer" : "more",
            " operands were provided than specified in the equation (", tensors.size(), " for ", terms.size(),
            " terms)");
  FLB_CHECK(arrow == std::string::npos || eq.find("->", arrow + 2) == std::string::npos, ValueError,
            "[einsum] the equation '", equation, "' has more than one '->'");
  const DType dt = tensors[0].dtype();

  // Dims per operand, the ellipsis span, and every label's (broadcast) size.
  std::map<int, int64_t> size;
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = tensors[i];
    FLB_CHECK(t.dtype() == dt, TypeError, "[einsum] operands must have the same dtype: operand 0 is ",
              dtype_name(dt), ", operand ", i, " is ", dtype_name(t.dtype()));
    const int64_t letters = int64_t(terms[i].labels.size()) - (terms[i].ellipsis ? 1 : 0);
    if (terms[i].ellipsis)
      FLB_CHECK(letters <= t.dim(), ValueError, "[einsum] the number of subscripts in the equation (", letters,
                ") is more than the number of dimensions (", t.dim(), ") for operand ", i, " of shape ",
                shape_str(t.sizes()));
    else
      FLB_CHECK(letters == t.dim(), ValueError, "[einsum] the number of subscripts in the equation (", letters,
                ") does not match the number of dimensions (", t.dim(), ") for operand ", i, " of shape ",
                shape_str(t.sizes()), " and no ellipsis was given");
    if (terms[i].ellipsis) ellipsis_dims = std::max(ellipsis_dims, t.dim() - letters);
  }
  // Each operand's labels, one per dim (its ellipsis right-aligned over the common span).
  std::vector<Operand> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = tensors[i];
    const int64_t span = t.dim() - (int64_t(terms[i].labels.size()) - (terms[i].ellipsis ? 1 : 0));
    std::vector<int> labels;
    for (int l : terms[i].labels) {
      if (l >= 0) labels.push_back(l);
      else
        for (int64_t e = 0; e < span; ++e) labels.push_back(int(kEllipsisBase + ellipsis_dims - span + e));
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      const int64_t n = t.size(int64_t(d));
      auto [it, fresh] = size.emplace(labels[d], n);
      if (fresh || n == it->second || n == 1) continue;
      if (it->second == 1) { it->second = n; continue; }
      if (labels[d] >= kEllipsisBase)
        FLB_CHECK(false, ValueError, "[einsum] dimension ", labels[d] - kEllipsisBase, " covered by ellipsis in operand ",
                  i, " of shape ", shape_str(t.sizes()), " has size ", n,
                  " which does not broadcast with previously seen ellipsis with size ", it->second,
                  " for the respective dimension");
      FLB_CHECK(false, ValueError, "[einsum] subscript ", char(labels[d] < 26 ? 'A' + labels[d] : 'a' + labels[d] - 26),
                " has size ", n, " for operand ", i, " of shape ", shape_str(t.sizes()),
                " which does not broadcast with previously seen size ", it->second);
    }
    ops.push_back({t, labels});
  }

  // The output's labels: as written, or every letter seen once in ascending order after the
  // ellipsis dims.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    const Term o = parse_term(eq, arrow + 2, eq.size(), 0, true);
    for (int l : o.labels) {
      if (l < 0) {
        for (int64_t e = 0; e < ellipsis_dims; ++e) out.push_back(int(kEllipsisBase + e));
        continue;
      }
      FLB_CHECK(!contains(out, l), ValueError, "[einsum] output subscript ", char(l < 26 ? 'A' + l : 'a' + l - 26),
                " appears more than once in the output");
      FLB_CHECK(size.count(l), ValueError, "[einsum] output subscript ", char(l < 26 ? 'A' + l : 'a' + l - 26),
                " does not appear in the equation for any input operand");
      out.push_back(l);
    }
  } else {
    std::map<int, int> count;
    for (const Term& t : terms)
      for (int l : t.labels)
        if (l >= 0) ++count[l];
    for (int64_t e = 0; e < ellipsis_dims; ++e) out.push_back(int(kEllipsisBase + e));
    for (auto [l, c] : count)
      if (c == 1) out.push_back(l);
  }

  // Repeated labels within an operand: its diagonal. Broadcast size-1 dims: squeezed.
  for (Operand& op : ops) {
    for (size_t d = 0; d < op.labels.size(); ++d)
      for (size_t e = op.labels.size() - 1; e > d; --e)
        if (op.labels[e] == op.labels[d]) {
          // diagonal() puts the diagonal last: move it back to d.
          op.t = movedim(diagonal(op.t, 0, int64_t(d), int64_t(e)), Dims{-1}, Dims{int64_t(d)});
          op.labels.erase(op.labels.begin() + int64_t(e));
        }
    for (size_t d = op.labels.size(); d-- > 0;)
      if (op.t.size(int64_t(d)) == 1 && size.at(op.labels[d]) != 1) {
        op.t = op.t.squeeze(int64_t(d));
        op.labels.erase(op.labels.begin() + int64_t(d));
      }
  }
  for (size_t i = 0; i < ops.size(); ++i) sum_out(ops[i], needed_labels(ops, i, i, out));

  // Pairwise contractions: the given path, or the pair of least work first.
  size_t step = 0;
  while (ops.size() > 1) {
    size_t ia = 0, ib = 1;
    if (path) {
      FLB_CHECK(2 * step + 1 < path->size(), ValueError, "[einsum] path ", shape_str(*path),
                " has fewer contractions than the ", tensors.size(), " operands need");
      ia = size_t((*path)[2 * step]), ib = size_t((*path)[2 * step + 1]);
      FLB_CHECK(ia != ib && ia < ops.size() && ib < ops.size(), ValueError, "[einsum] path ", shape_str(*path),
                " names operands (", ia, ", ", ib, ") of ", ops.size(), " at step ", step);
      if (ia > ib) std::swap(ia, ib);
    } else {
      int64_t best = -1;
      for (size_t i = 0; i < ops.size(); ++i)
        for (size_t j = i + 1; j < ops.size(); ++j) {
          std::vector<int> all = ops[i].labels;
          for (int l : ops[j].labels)
            if (!contains(all, l)) all.push_back(l);
          const int64_t work = product_of_sizes(all, size);
          if (best < 0 || work < best) best = work, ia = i, ib = j;
        }
    }
    Operand c = contract(ops[ia], ops[ib], needed_labels(ops, ia, ib, out), size);
    ops.erase(ops.begin() + int64_t(ib));
    ops.erase(ops.begin() + int64_t(ia));
    ops.push_back(std::move(c));
    ++step;
  }
  Operand& r = ops[0];
  sum_out(r, out);
  // Output labels missing from the result were squeezed size-1 dims (or summed ones of size 1).
  Dims perm, shape;
  for (int l : out) shape.push_back(size.at(l));
  Tensor t = r.t;
  for (int l : out)
    if (!contains(r.labels, l)) t = t.unsqueeze(t.dim()), r.labels.push_back(l);
  bool identity = true;
  for (int l : out) {
    perm.push_back(std::find(r.labels.begin(), r.labels.end(), l) - r.labels.begin());
    identity = identity && perm.back() == int64_t(perm.size()) - 1;
  }
  if (!identity) t = t.permute(perm);
  return t.sizes() == shape ? t : t.expand(shape);
}

FLB_OP(tensordot, (const Tensor& a, const Tensor& b, const Dims& dims_a, const Dims& dims_b), (a, b, dims_a, dims_b),
       Tensor) {
  FLB_CHECK(dims_a.size() == dims_b.size(), ValueError, "[tensordot] both dimension lists should have same length, got ",
            shape_str(dims_a), " and ", shape_str(dims_b));
  std::vector<bool> ca(size_t(a.dim()), false), cb(size_t(b.dim()), false);
  Dims pa, pb, out;
  int64_t k = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    const int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"), db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    FLB_CHECK(a.size(da) == b.size(db), ValueError, "[tensordot] contracted dimensions need to match, but first has size ",
              a.size(da), " in dim ", da, " and second has size ", b.size(db), " in dim ", db, " (shapes ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
    FLB_CHECK(!ca[size_t(da)] && !cb[size_t(db)], ValueError, "[tensordot] dim ", ca[size_t(da)] ? da : db,
              " appears multiple times in the list of dims");
    ca[size_t(da)] = cb[size_t(db)] = true;
    k *= a.size(da);
  }
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!ca[size_t(d)]) pa.push_back(d), out.push_back(a.size(d)), m *= a.size(d);
  for (int64_t d : dims_a) pa.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) pb.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t d = 0; d < b.dim(); ++d)
    if (!cb[size_t(d)]) pb.push_back(d), out.push_back(b.size(d)), n *= b.size(d);
  return mm(a.permute(pa).reshape({m, k}), b.permute(pb).reshape({k, n})).reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  FLB_CHECK(dims >= 0, ValueError, "[tensordot] expects dims >= 0, but got dims=", dims);
  FLB_CHECK(dims <= a.dim() && dims <= b.dim(), ValueError, "[tensordot] expects dims <= the dimensions of both inputs (",
            a.dim(), " and ", b.dim(), "), but got dims=", dims);
  Dims da, db;
  for (int64_t i = 0; i < dims; ++i) da.push_back(a.dim() - dims + i), db.push_back(i);
  return tensordot(a, b, da, db);
}

}  // namespace flambeau
