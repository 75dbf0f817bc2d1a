// rnn_layer (nn/rnn.h): one layer and direction of an RNN / LSTM / GRU over packed rows as
// one primitive. Forward: per step one GEMM h @ W_hh^T on the step's rows and a fused
// pointwise gate kernel, saving the activations. Backward through time: per step the
// pointwise derivative and one GEMM dgates @ W_hh for the previous state; the weight
// gradients are single GEMMs over all steps (dW_hh = dgates^T @ h_prev, dW_hr likewise).
// Pointwise work is split by rows and the GEMMs are deterministic, so results do not
// depend on the thread count.
#include <algorithm>
#include <cstring>

#include "flambeau/autograd/function.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/nn/rnn.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc) {
  kernels::gemm_f32(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc) {
  kernels::gemm_f64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}
void sigmoid_(float* x, int64_t n) { kernels::unary_f32(kernels::UnaryOp::sigmoid, x, x, n); }
void sigmoid_(double* x, int64_t n) { kernels::unary_f64(kernels::UnaryOp::sigmoid, x, x, n); }
void tanh_to(const float* x, float* y, int64_t n) { kernels::unary_f32(kernels::UnaryOp::tanh, x, y, n); }
void tanh_to(const double* x, double* y, int64_t n) { kernels::unary_f64(kernels::UnaryOp::tanh, x, y, n); }

// Rows [0, n) in pieces of about 16k values, for the pointwise kernels.
template <class F>
void for_rows(int64_t n, int64_t width, const F& f) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r);
  });
}

struct Steps {
  std::vector<int64_t> sizes, offsets;  // per step: rows, first row
  int64_t rows = 0, batch = 0;
  explicit Steps(const std::vector<int64_t>& bs) : sizes(bs) {
    for (int64_t s : bs) offsets.push_back(rows), rows += s;
    batch = bs.empty() ? 0 : bs[0];
  }
  int64_t count() const { return int64_t(sizes.size()); }
};

// The buffers the forward fills and the backward reads (contiguous, compute dtype).
struct Saved {
  Tensor gates;  // [N, G * H] activations (RNN: the outputs; GRU: r, z, n)
  Tensor h_prev;  // [N, P] the state each step started from
  Tensor c_prev, tanh_c;  // LSTM [N, H]
  Tensor h_raw;  // LSTM with projection [N, H]: o * tanh(c)
  Tensor hw;  // GRU [N, 3 H]: h @ W_hh^T + b_hh
};

template <class T>
void forward_impl(RnnMode mode, const Steps& st, int64_t H, int64_t P, const T* xw, const T* w_hh, const T* b_hh,
                  const T* w_hr, T* h, T* c, T* out, Saved& s) {
  const int64_t G = rnn_gates(mode), GH = G * H;
  T* gates = s.gates.data<T>();
  T* hprev = s.h_prev.data<T>();
  T* cprev = mode == RnnMode::lstm ? s.c_prev.data<T>() : nullptr;
  T* tanhc = mode == RnnMode::lstm ? s.tanh_c.data<T>() : nullptr;
  T* hraw = w_hr ? s.h_raw.data<T>() : nullptr;
  T* hw = mode == RnnMode::gru ? s.hw.data<T>() : nullptr;
  for (int64_t t = 0; t < st.count(); ++t) {
    const int64_t r0 = st.offsets[size_t(t)], n = st.sizes[size_t(t)];
    std::memcpy(hprev + r0 * P, h, size_t(n * P) * sizeof(T));
    T* g = gates + r0 * GH;
    if (mode == RnnMode::gru) {
      T* hwr = hw + r0 * GH;
      gemm(false, true, n, GH, P, h, P, w_hh, P, T(0), hwr, GH);
      for_rows(n, GH, [&](int64_t r) {
        const T* x = xw + (r0 + r) * GH;
        T* hr = hwr + r * GH;
        T* gr = g + r * GH;
        T* hrow = h + r * P;
        if (b_hh)
          for (int64_t j = 0; j < GH; ++j) hr[j] += b_hh[j];
        for (int64_t j = 0; j < 2 * H; ++j) gr[j] = x[j] + hr[j];
        sigmoid_(gr, 2 * H);
        for (int64_t j = 0; j < H; ++j) gr[2 * H + j] = x[2 * H + j] + gr[j] * hr[2 * H + j];
        tanh_to(gr + 2 * H, gr + 2 * H, H);
        T* o = out + (r0 + r) * P;
        for (int64_t j = 0; j < H; ++j) {
          const T nn = gr[2 * H + j];
          o[j] = (hrow[j] - nn) * gr[H + j] + nn;
          hrow[j] = o[j];
        }
      });
      continue;
    }
    std::memcpy(g, xw + r0 * GH, size_t(n * GH) * sizeof(T));
    gemm(false, true, n, GH, P, h, P, w_hh, P, T(1), g, GH);
    if (mode != RnnMode::lstm) {
      for_rows(n, GH, [&](int64_t r) {
        T* gr = g + r * GH;
        if (mode == RnnMode::rnn_tanh) tanh_to(gr, gr, H);
        else
          for (int64_t j = 0; j < H; ++j) gr[j] = gr[j] > T(0) ? gr[j] : T(0);
        std::memcpy(out + (r0 + r) * P, gr, size_t(H) * sizeof(T));
        std::memcpy(h + r * P, gr, size_t(H) * sizeof(T));
      });
      continue;
    }
    T* cp = cprev + r0 * H;
    std::memcpy(cp, c, size_t(n * H) * sizeof(T));
    T* tc = tanhc + r0 * H;
    T* hr_rows = w_hr ? hraw + r0 * H : out + r0 * P;  // o * tanh(c): the output unless projected
    for_rows(n, GH, [&](int64_t r) {
      T* gr = g + r * GH;
      sigmoid_(gr, 2 * H);
      tanh_to(gr + 2 * H, gr + 2 * H, H);
      sigmoid_(gr + 3 * H, H);
      T* crow = c + r * H;
      for (int64_t j = 0; j < H; ++j) crow[j] = gr[H + j] * crow[j] + gr[j] * gr[2 * H + j];
      T* tr = tc + r * H;
      tanh_to(crow, tr, H);
      T* hr = hr_rows + r * (w_hr ? H : P);
      for (int64_t j = 0; j < H; ++j) hr[j] = gr[3 * H + j] * tr[j];
    });
    if (w_hr) gemm(false, true, n, P, H, hr_rows, H, w_hr, H, T(0), out + r0 * P, P);
    std::memcpy(h, out + r0 * P, size_t(n * P) * sizeof(T));
  }
}

// Gradients of forward_impl: dh / dc hold dh_n / dc_n on entry and dh0 / dc0 on exit; dxw
// [N, G H] gets the gradient of the pre-activations, dhw (GRU) [N, 3 H] that of h @ W_hh^T +
// b_hh, dh_all (projection) [N, P] the gradient of each step's output h.
template <class T>
void backward_impl(RnnMode mode, const Steps& st, int64_t H, int64_t P, const T* w_hh, const T* w_hr,
                   const Saved& s, const T* dout, T* dh, T* dc, T* dxw, T* dhw, T* dh_all) {
  const int64_t G = rnn_gates(mode), GH = G * H;
  const T* gates = s.gates.data<T>();
  std::vector<T> dhr_buf(w_hr ? size_t(st.batch * H) : 0);
  for (int64_t t = st.count() - 1; t >= 0; --t) {
    const int64_t r0 = st.offsets[size_t(t)], n = st.sizes[size_t(t)];
    const T* d_o = dout + r0 * P;
    for (int64_t i = 0; i < n * P; ++i) dh[i] += d_o[i];
    T* dg = dxw + r0 * GH;
    const T* g = gates + r0 * GH;
    if (mode == RnnMode::lstm) {
      const T* dhr = dh;  // gradient of o * tanh(c)
      if (w_hr) {
        std::memcpy(dh_all + r0 * P, dh, size_t(n * P) * sizeof(T));
        gemm(false, false, n, H, P, dh, P, w_hr, H, T(0), dhr_buf.data(), H);
        dhr = dhr_buf.data();
      }
      const T* cp = s.c_prev.data<T>() + r0 * H;
      const T* tc = s.tanh_c.data<T>() + r0 * H;
      const int64_t ld = w_hr ? H : P;
      for_rows(n, GH, [&](int64_t r) {
        const T* gr = g + r * GH;
        T* d = dg + r * GH;
        const T* dhrow = dhr + r * ld;
        const T* cpr = cp + r * H;
        const T* tcr = tc + r * H;
        T* dcr = dc + r * H;
        for (int64_t j = 0; j < H; ++j) {
          const T i = gr[j], f = gr[H + j], gg = gr[2 * H + j], o = gr[3 * H + j], tcj = tcr[j];
          const T dct = dcr[j] + dhrow[j] * o * (T(1) - tcj * tcj);
          d[j] = dct * gg * i * (T(1) - i);
          d[H + j] = dct * cpr[j] * f * (T(1) - f);
          d[2 * H + j] = dct * i * (T(1) - gg * gg);
          d[3 * H + j] = dhrow[j] * tcj * o * (T(1) - o);
          dcr[j] = dct * f;
        }
      });
      gemm(false, false, n, P, GH, dg, GH, w_hh, P, T(0), dh, P);
    } else if (mode == RnnMode::gru) {
      const T* hp = s.h_prev.data<T>() + r0 * P;
      const T* hwn = s.hw.data<T>() + r0 * GH;
      T* dw = dhw + r0 * GH;
      for_rows(n, GH, [&](int64_t r) {
        const T* gr = g + r * GH;
        const T* hpr = hp + r * P;
        const T* hwr = hwn + r * GH;
        T* d = dg + r * GH;
        T* e = dw + r * GH;
        T* dhrow = dh + r * P;
        for (int64_t j = 0; j < H; ++j) {
          const T rr = gr[j], z = gr[H + j], nn = gr[2 * H + j], dy = dhrow[j];
          const T dn = dy * (T(1) - z) * (T(1) - nn * nn);
          const T dz = dy * (hpr[j] - nn) * z * (T(1) - z);
          const T dr = dn * hwr[2 * H + j] * rr * (T(1) - rr);
          d[j] = dr, d[H + j] = dz, d[2 * H + j] = dn;
          e[j] = dr, e[H + j] = dz, e[2 * H + j] = dn * rr;
          dhrow[j] = dy * z;
        }
      });
      gemm(false, false, n, P, GH, dw, GH, w_hh, P, T(1), dh, P);
    } else {
      for_rows(n, GH, [&](int64_t r) {
        const T* y = g + r * GH;
        T* d = dg + r * GH;
        const T* dhrow = dh + r * P;
        if (mode == RnnMode::rnn_tanh)
          for (int64_t j = 0; j < H; ++j) d[j] = dhrow[j] * (T(1) - y[j] * y[j]);
        else
          for (int64_t j = 0; j < H; ++j) d[j] = y[j] > T(0) ? dhrow[j] : T(0);
      });
      gemm(false, false, n, P, GH, dg, GH, w_hh, P, T(0), dh, P);
    }
  }
}

Tensor contiguous_as(const Tensor& t, DType dt) {
  return t.defined() ? t.to(dt).contiguous() : Tensor();
}

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

std::vector<Tensor> rnn_layer(RnnMode mode, const Tensor& xw_in, const Tensor& h0, const Tensor& c0,
                              const Tensor& w_hh_in, const Tensor& b_hh_in, const Tensor& w_hr_in,
                              const std::vector<int64_t>& batch_sizes, bool reverse) {
  const DType dt = xw_in.dtype();
  FLB_CHECK(dt == kFloat32 || dt == kFloat64, TypeError, "[rnn_layer] expected float32 or float64, got ",
            dtype_name(dt));
  // Reversed, the steps run last to first: offsets are of the original order.
  Steps st(batch_sizes);
  Steps order = st;
  if (reverse) {
    std::reverse(order.sizes.begin(), order.sizes.end());
    std::reverse(order.offsets.begin(), order.offsets.end());
  }
  const int64_t G = rnn_gates(mode), H = w_hh_in.size(0) / G, P = w_hh_in.size(1), N = st.rows, B = st.batch;
  FLB_CHECK(xw_in.dim() == 2 && xw_in.size(0) == N && xw_in.size(1) == G * H, ValueError,
            "[rnn_layer] expected input projections of shape (", N, ", ", G * H, "), got ",
            shape_str(xw_in.sizes()));
  const Tensor xw = xw_in.contiguous(), w_hh = w_hh_in.contiguous();
  const Tensor b_hh = contiguous_as(b_hh_in, dt), w_hr = contiguous_as(w_hr_in, dt);
  const bool lstm = mode == RnnMode::lstm;
  Tensor h = h0.to(dt).contiguous().clone(), c = lstm ? c0.to(dt).contiguous().clone() : Tensor();
  Tensor out = empty({N, P}, dt);
  Saved s;
  s.gates = empty({N, G * H}, dt);
  s.h_prev = empty({N, P}, dt);
  if (lstm) s.c_prev = empty({N, H}, dt), s.tanh_c = empty({N, H}, dt);
  if (w_hr.defined()) s.h_raw = empty({N, H}, dt);
  if (mode == RnnMode::gru) s.hw = empty({N, G * H}, dt);
  {
    autograd::NoGradGuard no_grad;
    auto run = [&]<class T>() {
      forward_impl<T>(mode, order, H, P, xw.data<T>(), w_hh.data<T>(), ptr<T>(b_hh), ptr<T>(w_hr), h.data<T>(),
                      lstm ? c.data<T>() : nullptr, out.data<T>(), s);
    };
    if (dt == kFloat64) run.template operator()<double>();
    else run.template operator()<float>();
  }
  const bool need_w = autograd::requires_grad(w_hh_in), need_b = b_hh_in.defined() && autograd::requires_grad(b_hh_in),
             need_r = w_hr_in.defined() && autograd::requires_grad(w_hr_in);
  std::vector<Tensor*> outputs{&out, &h};
  if (lstm) outputs.push_back(&c);
  const std::vector<const Tensor*> inputs{&xw_in, h0.defined() ? &h0 : nullptr, c0.defined() ? &c0 : nullptr,
                                          &w_hh_in, b_hh_in.defined() ? &b_hh_in : nullptr,
                                          w_hr_in.defined() ? &w_hr_in : nullptr};
  std::vector<Tensor> saved{w_hh, w_hr.defined() ? w_hr : Tensor(), s.gates, s.h_prev,
                            lstm ? s.c_prev : Tensor(), lstm ? s.tanh_c : Tensor(),
                            w_hr.defined() ? s.h_raw : Tensor(), mode == RnnMode::gru ? s.hw : Tensor()};
  autograd::record_many(
      "RnnLayerBackward0", outputs, inputs, std::move(saved),
      [mode, order, H, P, N, B, G, dt, lstm, need_w, need_b, need_r](const std::vector<Tensor>& grads,
                                                                     const std::vector<Tensor>& sv) {
        Saved s;
        s.gates = sv[2], s.h_prev = sv[3], s.c_prev = sv[4], s.tanh_c = sv[5], s.h_raw = sv[6], s.hw = sv[7];
        const Tensor& w_hh = sv[0];
        const Tensor& w_hr = sv[1];
        const Tensor dout = grads[0].to(dt).contiguous();
        Tensor dh = grads[1].to(dt).contiguous().clone();
        Tensor dc = lstm ? grads[2].to(dt).contiguous().clone() : Tensor();
        Tensor dxw = empty({N, G * H}, dt);
        Tensor dhw = mode == RnnMode::gru ? empty({N, G * H}, dt) : Tensor();
        Tensor dh_all = w_hr.defined() ? empty({N, P}, dt) : Tensor();
        Tensor dw_hh, db_hh, dw_hr;
        autograd::NoGradGuard no_grad;
        auto run = [&]<class T>() {
          backward_impl<T>(mode, order, H, P, w_hh.data<T>(), ptr<T>(w_hr), s, dout.data<T>(), dh.data<T>(),
                           lstm ? dc.data<T>() : nullptr, dxw.data<T>(), ptr<T>(dhw), ptr<T>(dh_all));
          const Tensor& dpre = mode == RnnMode::gru ? dhw : dxw;
          if (need_w) {
            dw_hh = empty({G * H, P}, dt);
            gemm(true, false, G * H, P, N, dpre.data<T>(), G * H, s.h_prev.data<T>(), P, T(0), dw_hh.data<T>(), P);
          }
          if (need_r) {
            dw_hr = empty({P, H}, dt);
            gemm(true, false, P, H, N, dh_all.data<T>(), P, s.h_raw.data<T>(), H, T(0), dw_hr.data<T>(), H);
          }
          if (need_b) db_hh = sum(dhw, {0});
        };
        if (dt == kFloat64) run.template operator()<double>();
        else run.template operator()<float>();
        (void)B;
        return std::vector<Tensor>{dxw, dh, dc, dw_hh, db_hh, dw_hr};
      });
  return lstm ? std::vector<Tensor>{out, h, c} : std::vector<Tensor>{out, h};
}

}  // namespace flambeau::nn::functional
