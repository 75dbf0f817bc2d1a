// float32 convolution forward and backward-input through oneDNN's direct convolutions
// (built when CMake finds oneDNN; no_onednn.cpp otherwise). Tensors stay in flambeau's
// N, C, D, H, W layout; oneDNN picks its blocked layouts and the data is reordered in and
// out (Note [oneDNN convolutions] in conv.cpp says when this path is taken). oneDNN keeps
// its own cache of primitives, so repeated shapes are cheap. Builds against oneDNN 2.x
// (Debian 12) and 3.x (Debian 13), whose primitive APIs differ. Channels-last tensors are
// read and written as they lie (oneDNN's NHWC kernels); only the weights are reordered.
#include <dnnl.hpp>
#include <omp.h>

#include <string>

#include "flambeau/core/tensor.h"
#include "flambeau/kernels/cpu/conv.h"

namespace flambeau::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The problem in oneDNN's terms: 2-d when the depth dims are trivial, else 3-d.
struct Problem {
  bool planar;
  memory::dims src, weights, bias, dst, strides, dilates, pad_l, pad_r;
  Tag data_tag, weights_tag;

  explicit Problem(const ConvGeometry& g) {
    planar = g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad[0] == 0;
    const int first = planar ? 1 : 0;
    src = {g.batch, g.in_channels}, dst = {g.batch, g.out_channels};
    weights = g.groups > 1 ? memory::dims{g.groups, g.out_channels / g.groups, g.in_channels / g.groups}
                           : memory::dims{g.out_channels, g.in_channels};
    bias = {g.out_channels};
    for (int i = first; i < 3; ++i) {
      src.push_back(g.in[i]), dst.push_back(g.out[i]), weights.push_back(g.kernel[i]);
      strides.push_back(g.stride[i]), dilates.push_back(g.dilation[i] - 1), pad_l.push_back(g.pad[i]);
      // The padding after: what the output size implies (negative when input is left over).
      pad_r.push_back((g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dilation[i] + 1 - g.in[i] - g.pad[i]);
    }
    data_tag = g.channels_last ? (planar ? Tag::nhwc : Tag::ndhwc) : (planar ? Tag::nchw : Tag::ncdhw);
    weights_tag = g.groups > 1            ? (planar ? Tag::goihw : Tag::goidhw)
                  : g.weight_channels_last ? (planar ? Tag::ohwi : Tag::odhwi)
                                           : (planar ? Tag::oihw : Tag::oidhw);
  }
  memory::desc any(const memory::dims& d) const { return {d, memory::data_type::f32, Tag::any}; }
  // Activations as the primitive reads them: channels-last data as it lies (oneDNN's nxc
  // kernels, no reorder), row-major data in whatever blocked layout oneDNN prefers.
  memory::desc data(const memory::dims& d) const {
    return data_tag == Tag::nchw || data_tag == Tag::ncdhw ? any(d) : plain(d, data_tag);
  }
  memory::desc plain(const memory::dims& d, Tag t) const { return {d, memory::data_type::f32, t}; }
};

dnnl::convolution_forward::primitive_desc forward_pd(const Problem& p, bool with_bias) {
  const memory::desc bias = with_bias ? p.any(p.bias) : memory::desc();
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p.data(p.src),
          p.any(p.weights), bias, p.data(p.dst), p.strides, p.dilates, p.pad_l, p.pad_r};
#else
  return {{dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p.data(p.src), p.any(p.weights),
           bias, p.data(p.dst), p.strides, p.dilates, p.pad_l, p.pad_r},
          engine()};
#endif
}

// The backward primitive (convolution_backward_data or _weights) of p: both take the
// descriptors of (diff_)src, (diff_)weights and diff_dst, and the forward's as a hint.
template <class Prim>
typename Prim::primitive_desc backward_pd(const Problem& p) {
  const auto hint = forward_pd(p, false);
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), dnnl::algorithm::convolution_direct, p.data(p.src), p.any(p.weights), p.data(p.dst),
          p.strides, p.dilates, p.pad_l, p.pad_r, hint};
#else
  return {{dnnl::algorithm::convolution_direct, p.data(p.src), p.any(p.weights), p.data(p.dst), p.strides,
           p.dilates, p.pad_l, p.pad_r},
          engine(), hint};
#endif
}

// Scratch memory of a oneDNN layout from flambeau's caching allocator.
struct Buffer {
  std::shared_ptr<Storage> storage;
  memory mem;
  Buffer(const memory::desc& d) : storage(Storage::allocate(d.get_size(), kCPU)), mem(d, engine(), storage->data) {}
};

// `user` (a flambeau buffer) as oneDNN wants it (desc): itself, or a reordered copy.
memory to_layout(const memory& user, const memory::desc& desc, dnnl::stream& s, std::vector<Buffer>& keep) {
  if (user.get_desc() == desc) return user;
  keep.emplace_back(desc);
  dnnl::reorder(user, keep.back().mem).execute(s, const_cast<memory&>(user), keep.back().mem);
  return keep.back().mem;
}

// Runs prim with its arguments, `out` (oneDNN's layout) reordered into `user_out`.
template <class Prim>
void run(const Prim& prim, std::unordered_map<int, memory> args, int out_arg, const memory& user_out,
         const memory::desc& out_desc, dnnl::stream& s, std::vector<Buffer>& keep) {
  const bool direct = user_out.get_desc() == out_desc;
  if (!direct) keep.emplace_back(out_desc);
  memory out = direct ? user_out : keep.back().mem;
  args[out_arg] = out;
  prim.execute(s, args);
  if (!direct) dnnl::reorder(out, user_out).execute(s, out, const_cast<memory&>(user_out));
  s.wait();
}

bool usable(const ConvGeometry& g) {
  return g.batch > 0 && g.in_channels > 0 && g.out_channels > 0 && g.in_volume() > 0 && g.out_volume() > 0;
}

// oneDNN's im2col + GEMM implementations ("gemm:jit") are no better than flambeau's own,
// whose bits are thread-independent by construction: only its direct kernels are taken.
template <class PD>
bool direct_kernel(const PD& pd) {
  return std::string(pd.impl_info_str()).find("gemm") == std::string::npos;
}

}  // namespace

bool onednn_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  if (!usable(g)) return false;  // oneDNN 2.6 may die with SIGFPE on empty problems
  try {
    const Problem p(g);
    const auto pd = forward_pd(p, bias != nullptr);
    if (!direct_kernel(pd)) return false;
    dnnl::stream s(engine());
    std::vector<Buffer> keep;
    keep.reserve(4);
    const memory xm(p.plain(p.src, p.data_tag), engine(), const_cast<float*>(x));
    const memory wm(p.plain(p.weights, p.weights_tag), engine(), const_cast<float*>(w));
    const memory ym(p.plain(p.dst, p.data_tag), engine(), y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, to_layout(xm, pd.src_desc(), s, keep)},
                                         {DNNL_ARG_WEIGHTS, to_layout(wm, pd.weights_desc(), s, keep)}};
    if (bias) {
      const memory bm(p.plain(p.bias, Tag::x), engine(), const_cast<float*>(bias));
      args[DNNL_ARG_BIAS] = to_layout(bm, pd.bias_desc(), s, keep);
    }
    run(dnnl::convolution_forward(pd), std::move(args), DNNL_ARG_DST, ym, pd.dst_desc(), s, keep);
    return true;
  } catch (const dnnl::error&) {
    return false;  // no implementation for this problem here: the caller takes its own path
  }
}

bool onednn_conv_backward_input(const ConvGeometry& g, const float* gy, const float* w, float* gx) {
  if (!usable(g)) return false;
  try {
    const Problem p(g);
    const auto pd = backward_pd<dnnl::convolution_backward_data>(p);
    if (!direct_kernel(pd)) return false;
    dnnl::stream s(engine());
    std::vector<Buffer> keep;
    keep.reserve(4);
    const memory gym(p.plain(p.dst, p.data_tag), engine(), const_cast<float*>(gy));
    const memory wm(p.plain(p.weights, p.weights_tag), engine(), const_cast<float*>(w));
    const memory gxm(p.plain(p.src, p.data_tag), engine(), gx);
    run(dnnl::convolution_backward_data(pd),
        {{DNNL_ARG_DIFF_DST, to_layout(gym, pd.diff_dst_desc(), s, keep)},
         {DNNL_ARG_WEIGHTS, to_layout(wm, pd.weights_desc(), s, keep)}},
        DNNL_ARG_DIFF_SRC, gxm, pd.diff_src_desc(), s, keep);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool onednn_conv_backward_weight_1t(const ConvGeometry& g, const float* x, const float* gy, float* gw) {
  if (!usable(g)) return false;
  // One thread: oneDNN cuts its work by omp_get_max_threads(), and a sum over the batch cut
  // by the thread count would change bits with it. This task's setting only.
  struct OneThread {
    int previous = omp_get_max_threads();
    OneThread() { omp_set_num_threads(1); }
    ~OneThread() { omp_set_num_threads(previous); }
  } one_thread;
  try {
    const Problem p(g);
    const auto pd = backward_pd<dnnl::convolution_backward_weights>(p);
    if (!direct_kernel(pd)) return false;
    dnnl::stream s(engine());
    std::vector<Buffer> keep;
    keep.reserve(4);
    const memory xm(p.plain(p.src, p.data_tag), engine(), const_cast<float*>(x));
    const memory gym(p.plain(p.dst, p.data_tag), engine(), const_cast<float*>(gy));
    const memory gwm(p.plain(p.weights, p.weights_tag), engine(), gw);
    run(dnnl::convolution_backward_weights(pd),
        {{DNNL_ARG_SRC, to_layout(xm, pd.src_desc(), s, keep)},
         {DNNL_ARG_DIFF_DST, to_layout(gym, pd.diff_dst_desc(), s, keep)}},
        DNNL_ARG_DIFF_WEIGHTS, gwm, pd.diff_weights_desc(), s, keep);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace flambeau::kernels
