// BlockMask: building it from a mask_mod block by block (never the Q_LEN x KV_LEN mask),
// from kv-major block lists, or from rows of a mask evaluated elsewhere (a Python mask_mod);
// the q-major transposes, slicing, cropping for decode, density and printing.
#include <sstream>

#include "flambeau/core/op_hook.h"
#include "flambeau/nn/flex_internal.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::attention {
namespace detail {

std::pair<Tensor, Tensor> transpose_ordered(const Tensor& num, const Tensor& idx, int64_t cols) {
  const int64_t B = num.size(0), H = num.size(1), R = num.size(2), W = idx.size(3);
  Tensor tn = zeros({B, H, cols}, kInt32), ti = zeros({B, H, cols, R}, kInt32);
  const int32_t* n = num.data<int32_t>();
  const int32_t* in = idx.data<int32_t>();
  int32_t* on = tn.data<int32_t>();
  int32_t* oi = ti.data<int32_t>();
  for_each_item(B * H, [&](int64_t bh) {
    int32_t* cnt = on + bh * cols;
    for (int64_t r = 0; r < R; ++r)  // rows ascending, so each column's list comes out sorted
      for (int64_t i = 0; i < n[bh * R + r]; ++i) {
        const int64_t c = in[(bh * R + r) * W + i];
        oi[(bh * cols + c) * R + cnt[c]++] = int32_t(r);
      }
  });
  return {tn, ti};
}

}  // namespace detail

namespace {

Tensor as_int32(const Tensor& t, const char* what, int64_t dim) {
  FLB_CHECK(t.dim() == dim && is_integral(t.dtype(), false), ValueError, "[BlockMask] ", what, " must be an integer tensor with ",
            dim, " dims, got ", shape_str(t.sizes()), " ", dtype_name(t.dtype()));
  return t.to(kInt32).contiguous();
}

// Validates (num, idx) and returns them as contiguous int32.
std::pair<Tensor, Tensor> checked_lists(const Tensor& num, const Tensor& idx, const char* name) {
  Tensor n = as_int32(num, name, 3), i = as_int32(idx, name, 4);
  FLB_CHECK(i.size(0) == n.size(0) && i.size(1) == n.size(1) && i.size(2) == n.size(2), ValueError, "[BlockMask] ",
            name, ": num_blocks ", shape_str(n.sizes()), " and indices ", shape_str(i.sizes()), " disagree");
  const int32_t* pn = n.data<int32_t>();
  const int32_t* pi = i.data<int32_t>();
  const int64_t W = i.size(3);
  for (int64_t row = 0; row < n.numel(); ++row) {
    FLB_CHECK(pn[row] >= 0 && pn[row] <= W, ValueError, "[BlockMask] ", name, ": ", pn[row],
              " blocks in a row of width ", W);
    for (int64_t j = 0; j < pn[row]; ++j)
      FLB_CHECK(pi[row * W + j] >= 0 && pi[row * W + j] < W, IndexError, "[BlockMask] ", name, ": block index ",
                pi[row * W + j], " is out of bounds for ", W, " kv blocks");
  }
  return {n, i};
}

// Offsets b and h before calling the wrapped mask (a sliced BlockMask).
struct Offset final : MaskMod {
  MaskModPtr inner;
  int64_t db, dh;
  Offset(MaskModPtr m, int64_t b, int64_t h) : inner(std::move(m)), db(b), dh(h) {}
  Tile shift(Tile t) const {
    t.b += db, t.h += dh;
    return t;
  }
  void eval(const Tile& t, uint8_t* out) const override { inner->eval(shift(t), out); }
  void apply(const Tile& t, float* s, uint8_t* scratch) const override { inner->apply(shift(t), s, scratch); }
  BlockKind classify(const Tile& t) const override { return inner->classify(shift(t)); }
  std::string name() const override { return inner->name(); }
};

// Partial tiles evaluated once and stored; id[b, h, qb, kb] = tile index or -1.
struct StoredTiles final : MaskMod {
  int64_t B = 1, H = 1, nq = 0, nk = 0, qbs = 0, kbs = 0, q_len = 0, kv_len = 0;
  std::vector<int32_t> id;
  std::vector<std::vector<uint8_t>> tiles;  // [qbs x kbs] each
  void eval(const Tile& t, uint8_t* out) const override {
    const int64_t b = B == 1 ? 0 : t.b, h = H == 1 ? 0 : t.h;
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t q = t.q0 + r, qb = q / qbs;
      for (int64_t c = 0; c < t.cols; ++c) {
        const int64_t kv = t.kv0 + c, kb = kv / kbs;
        const int32_t i = (qb < nq && kb < nk) ? id[size_t(((b * H + h) * nq + qb) * nk + kb)] : -1;
        out[r * t.ld + c] = i < 0 ? 0 : tiles[size_t(i)][size_t((q % qbs) * kbs + kv % kbs)];
      }
    }
  }
  std::string name() const override { return "mask_mod (evaluated tiles)"; }
};

// Fills row (b, h, qb) of the kv lists from the kinds of its nk blocks.
void store_row(const std::vector<BlockKind>& kinds, int32_t* pn, int32_t* pi, int32_t* fn, int32_t* fi) {
  int32_t np = 0, nf = 0;
  for (size_t j = 0; j < kinds.size(); ++j) {
    if (kinds[j] == BlockKind::partial) pi[np++] = int32_t(j);
    else if (kinds[j] == BlockKind::full) fi[nf++] = int32_t(j);
  }
  *pn = np, *fn = nf;
}

void check_sizes(int64_t B, int64_t H, int64_t L, int64_t S, int64_t qbs, int64_t kbs) {
  FLB_CHECK(B > 0 && H > 0 && L > 0 && S > 0 && qbs > 0 && kbs > 0, ValueError,
            "[create_block_mask] expected positive B, H, Q_LEN, KV_LEN and BLOCK_SIZE, got B=", B, " H=", H,
            " Q_LEN=", L, " KV_LEN=", S, " BLOCK_SIZE=(", qbs, ", ", kbs, ")");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

BlockMask from_kv_blocks(const Tensor& kv_num_blocks, const Tensor& kv_indices, const Tensor& full_kv_num_blocks,
                         const Tensor& full_kv_indices, int64_t q_block, int64_t kv_block, MaskModPtr mask_mod,
                         std::optional<std::pair<int64_t, int64_t>> seq_lengths) {
  FLB_CHECK(full_kv_num_blocks.defined() == full_kv_indices.defined(), ValueError,
            "[BlockMask.from_kv_blocks] full_kv_num_blocks and full_kv_indices must be given together");
  FLB_CHECK(q_block > 0 && kv_block > 0, ValueError, "[BlockMask.from_kv_blocks] BLOCK_SIZE must be positive, got (",
            q_block, ", ", kv_block, ")");
  BlockMask m;
  std::tie(m.kv_num_blocks, m.kv_indices) = checked_lists(kv_num_blocks, kv_indices, "kv_indices");
  if (full_kv_num_blocks.defined()) {
    std::tie(m.full_kv_num_blocks, m.full_kv_indices) = checked_lists(full_kv_num_blocks, full_kv_indices, "full_kv_indices");
    FLB_CHECK(m.full_kv_indices.sizes() == m.kv_indices.sizes(), ValueError, "[BlockMask.from_kv_blocks] full_kv_indices ",
              shape_str(m.full_kv_indices.sizes()), " and kv_indices ", shape_str(m.kv_indices.sizes()), " differ in shape");
  }
  m.q_block = q_block, m.kv_block = kv_block, m.mask_mod = std::move(mask_mod);
  const int64_t nq = m.kv_indices.size(2), nk = m.kv_indices.size(3);
  if (seq_lengths) {
    m.q_len = seq_lengths->first, m.kv_len = seq_lengths->second;
    FLB_CHECK(m.q_len > 0 && m.kv_len > 0 && ceil_div(m.q_len, q_block) <= nq && ceil_div(m.kv_len, kv_block) <= nk,
              ValueError, "[BlockMask.from_kv_blocks] seq_lengths (", m.q_len, ", ", m.kv_len, ") need more than the ",
              nq, " x ", nk, " blocks of kv_indices ", shape_str(m.kv_indices.sizes()));
  } else {
    m.q_len = nq * q_block, m.kv_len = nk * kv_block;
  }
  std::tie(m.q_num_blocks, m.q_indices) = detail::transpose_ordered(m.kv_num_blocks, m.kv_indices, nk);
  if (m.full_kv_num_blocks.defined())
    std::tie(m.full_q_num_blocks, m.full_q_indices) = detail::transpose_ordered(m.full_kv_num_blocks, m.full_kv_indices, nk);
  return m;
}

FLB_OP(create_block_mask,
       (MaskModPtr mask_mod, int64_t B, int64_t H, int64_t L, int64_t S, int64_t qbs,
        std::optional<int64_t> kv_block),
       (mask_mod, B, H, L, S, qbs, kv_block), BlockMask) {
  const int64_t kbs = kv_block.value_or(qbs);
  check_sizes(B, H, L, S, qbs, kbs);
  if (!mask_mod) mask_mod = noop_mask();
  mask_mod->check(B, H, L, S);
  const int64_t nq = ceil_div(L, qbs), nk = ceil_div(S, kbs);
  Tensor pn = empty({B, H, nq}, kInt32), pi = zeros({B, H, nq, nk}, kInt32);
  Tensor fn = empty({B, H, nq}, kInt32), fi = zeros({B, H, nq, nk}, kInt32);
  int32_t *ppn = pn.data<int32_t>(), *ppi = pi.data<int32_t>(), *pfn = fn.data<int32_t>(), *pfi = fi.data<int32_t>();
  detail::for_each_item(B * H * nq, [&](int64_t row) {
    const int64_t b = row / (H * nq), h = row / nq % H, q0 = row % nq * qbs;
    std::vector<BlockKind> kinds(static_cast<size_t>(nk));
    for (int64_t j = 0; j < nk; ++j) {
      const Tile t{b, h, q0, std::min(qbs, L - q0), j * kbs, std::min(kbs, S - j * kbs), 0};
      kinds[size_t(j)] = mask_mod->classify(t);
    }
    store_row(kinds, ppn + row, ppi + row * nk, pfn + row, pfi + row * nk);
  });
  return from_kv_blocks(pn, pi, fn, fi, qbs, kbs, std::move(mask_mod), std::pair{L, S});
}

FLB_OP(create_block_mask_from_rows,
       (const MaskRowsFn& rows, int64_t B, int64_t H, int64_t L, int64_t S, int64_t qbs, int64_t kbs),
       (rows, B, H, L, S, qbs, kbs), BlockMask) {
  check_sizes(B, H, L, S, qbs, kbs);
  const int64_t nq = ceil_div(L, qbs), nk = ceil_div(S, kbs);
  auto st = std::make_shared<StoredTiles>();
  st->B = B, st->H = H, st->nq = nq, st->nk = nk, st->qbs = qbs, st->kbs = kbs, st->q_len = L, st->kv_len = S;
  st->id.assign(size_t(B * H * nq * nk), -1);
  Tensor pn = empty({B, H, nq}, kInt32), pi = zeros({B, H, nq, nk}, kInt32);
  Tensor fn = empty({B, H, nq}, kInt32), fi = zeros({B, H, nq, nk}, kInt32);
  for (int64_t row = 0; row < B * H * nq; ++row) {
    const int64_t b = row / (H * nq), h = row / nq % H, q0 = row % nq * qbs, nr = std::min(qbs, L - q0);
    Tensor m = rows(b, h, q0, nr);
    FLB_CHECK(m.dim() == 2 && m.size(0) == nr && m.size(1) == S, ValueError, "[create_block_mask] the mask_mod gave ",
              shape_str(m.sizes()), " for a block row of ", nr, " queries and ", S, " keys");
    m = (m.dtype() == kBool ? m : ne(m, 0)).contiguous();  // bool: one byte, 0 or 1
    const uint8_t* p = static_cast<const uint8_t*>(m.data_ptr());
    std::vector<BlockKind> kinds(static_cast<size_t>(nk));
    detail::for_each_item(nk, [&](int64_t j) {  // count each block's ones
      const int64_t k0 = j * kbs, nc = std::min(kbs, S - k0);
      int64_t n = 0;
      for (int64_t r = 0; r < nr; ++r) {
        uint32_t rn = 0;
        for (int64_t c = 0; c < nc; ++c) rn += p[r * S + k0 + c];
        n += rn;
      }
      kinds[size_t(j)] = n == 0 ? BlockKind::empty : n == nr * nc ? BlockKind::full : BlockKind::partial;
    });
    for (int64_t j = 0; j < nk; ++j) {
      if (kinds[size_t(j)] != BlockKind::partial) continue;
      const int64_t k0 = j * kbs, nc = std::min(kbs, S - k0);
      st->id[size_t(row * nk + j)] = int32_t(st->tiles.size());
      std::vector<uint8_t> tile(size_t(qbs * kbs), 0);
      for (int64_t r = 0; r < nr; ++r) std::copy(p + r * S + k0, p + r * S + k0 + nc, tile.begin() + r * kbs);
      st->tiles.push_back(std::move(tile));
    }
    store_row(kinds, pn.data<int32_t>() + row, pi.data<int32_t>() + row * nk, fn.data<int32_t>() + row,
              fi.data<int32_t>() + row * nk);
  }
  return from_kv_blocks(pn, pi, fn, fi, qbs, kbs, std::move(st), std::pair{L, S});
}

double BlockMask::sparsity() const {
  int64_t blocks = 0;
  for (const Tensor* t : {&kv_num_blocks, &full_kv_num_blocks})
    if (t->defined()) blocks += sum(t->to(kInt64)).item<int64_t>();
  return 100.0 * (1.0 - double(blocks) * double(q_block) * double(kv_block) / double(numel()));
}

Tensor BlockMask::to_dense() const {
  Tensor d = zeros({batch(), heads(), num_q_blocks(), num_kv_blocks()}, kInt32);
  int32_t* o = d.data<int32_t>();
  const int64_t rows = batch() * heads() * num_q_blocks(), nk = num_kv_blocks();
  for (const auto& l : {detail::BlockList(kv_num_blocks, kv_indices), detail::BlockList(full_kv_num_blocks, full_kv_indices)})
    if (l.num)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < l.num[r]; ++j) o[r * nk + l.idx[r * nk + j]] = 1;
  return d;
}

BlockMask BlockMask::slice(int64_t b0, int64_t b1, int64_t h0, int64_t h1) const {
  FLB_CHECK(0 <= b0 && b0 < b1 && b1 <= batch() && 0 <= h0 && h0 < h1 && h1 <= heads(), IndexError,
            "[BlockMask.__getitem__] batch [", b0, ", ", b1, ") and heads [", h0, ", ", h1,
            ") are out of range for a mask of shape ", shape_str(kv_num_blocks.sizes()));
  auto cut = [&](const Tensor& t) { return t.defined() ? t.slice(0, b0, b1).slice(1, h0, h1).contiguous() : t; };
  MaskModPtr mm = mask_mod && (b0 || h0) ? std::make_shared<Offset>(mask_mod, b0, h0) : mask_mod;
  BlockMask m = from_kv_blocks(cut(kv_num_blocks), cut(kv_indices), cut(full_kv_num_blocks), cut(full_kv_indices),
                               q_block, kv_block, mm, std::pair{q_len, kv_len});
  m.sliced = true;
  return m;
}

BlockMask BlockMask::adjust(int64_t new_q_len, int64_t new_kv_len) const {
  const int64_t rows = ceil_div(new_q_len, q_block), cols = ceil_div(new_kv_len, kv_block);
  FLB_CHECK(new_q_len > 0 && new_kv_len > 0 && rows <= num_q_blocks() && cols <= num_kv_blocks(), ValueError,
            "[BlockMask._adjust] cannot crop a ", q_len, " x ", kv_len, " mask to ", new_q_len, " x ", new_kv_len,
            "; create a new block mask");
  auto crop = [&](const Tensor& num, const Tensor& idx) -> std::pair<Tensor, Tensor> {
    if (!num.defined()) return {};
    const int64_t B = num.size(0), H = num.size(1), W = idx.size(3);
    Tensor n = zeros({B, H, rows}, kInt32), i = zeros({B, H, rows, cols}, kInt32);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t* src = idx.data<int32_t>() + (bh * num.size(2) + r) * W;
        int32_t* dst = i.data<int32_t>() + (bh * rows + r) * cols;
        int32_t& cnt = n.data<int32_t>()[bh * rows + r];
        for (int64_t j = 0; j < num.data<int32_t>()[bh * num.size(2) + r]; ++j)
          if (src[j] < cols) dst[cnt++] = src[j];
      }
    return {n, i};
  };
  auto [pn, pi] = crop(kv_num_blocks, kv_indices);
  auto [fn, fi] = crop(full_kv_num_blocks, full_kv_indices);
  BlockMask m = from_kv_blocks(pn, pi, fn, fi, q_block, kv_block, mask_mod, std::pair{new_q_len, new_kv_len});
  m.sliced = sliced;
  return m;
}

std::string BlockMask::to_string() const {
  std::ostringstream s;
  s << "BlockMask(shape=(" << batch() << ", " << heads() << ", " << q_len << ", " << kv_len << "), sparsity="
    << sparsity() << "%, BLOCK_SIZE=(" << q_block << ", " << kv_block << "), mask_mod="
    << (mask_mod ? mask_mod->name() : "noop_mask") << ")";
  return s.str();
}

}  // namespace flambeau::nn::attention
