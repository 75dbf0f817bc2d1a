// Resampling: nn.functional's interpolate (nearest, nearest-exact, linear, bilinear, bicubic,
// trilinear, area; antialiased bilinear / bicubic) with torch's argument rules and messages,
// primitives over kernels/cpu/resample.h; pixel_shuffle / pixel_unshuffle as one permuting
// copy each (Note [Pixel shuffle]); unfold / fold over the convolution's im2col / col2im
// (kernels/cpu/conv.h), each the other's backward.
#include <cmath>
#include <string>

#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/core/shape.h"
#include "flambeau/kernels/cpu/conv.h"
#include "flambeau/kernels/cpu/resample.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

using kernels::ResampleGeometry;
using kernels::ResampleMode;
using kernels::Taps;

DType compute_dtype(const Tensor& x) { return x.dtype() == kFloat64 ? kFloat64 : kFloat32; }

template <class F>
void visit_compute(DType ct, F&& f) {
  if (ct == kFloat64) f.template operator()<double>();
  else f.template operator()<float>();
}

std::string list_str(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    std::string t = std::to_string(v[i]);
    t.erase(t.find_last_not_of('0') + 1);
    if (t.back() == '.') t += '0';
    s += t;
  }
  return s + "]";
}

// "[5, 7]", as Python prints a list.
std::string dims_list(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// One upsample primitive: x [N, C, *spatial] (n spatial dims) to out sizes, recorded as `node`.
// antialias (2-d linear / cubic only): kernels' antialias taps and separable passes.
Tensor upsample(const char* node, ResampleMode mode, const Tensor& x, const Dims& out, bool align_corners,
                const std::vector<double>& scales, bool antialias = false) {
  const int64_t n = int64_t(out.size());
  const char* letters[] = {"D", "H", "W"};
  std::string in_s = "(", out_s = "(";
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    const char* l = letters[3 - n + i];
    in_s += std::string(i ? ", " : "") + l + ": " + std::to_string(x.size(2 + i));
    out_s += std::string(i ? ", " : "") + l + ": " + std::to_string(out[size_t(i)]);
    ok = ok && x.size(2 + i) > 0 && out[size_t(i)] > 0;
  }
  FLB_CHECK(ok, ValueError, "[interpolate] Input and output sizes should be greater than 0, but got input ", in_s,
            ") output ", out_s, ") for input of shape ", shape_str(x.sizes()));
  FLB_CHECK(x.size(1) > 0 || x.size(0) == 0, ValueError,
            "[interpolate] Non-empty ", n + 2, "D data tensor expected but got a tensor with sizes ",
            shape_str(x.sizes()));
  FLB_CHECK(x.is_floating_point(), TypeError, "[interpolate] expected a floating point input, got ",
            dtype_name(x.dtype()));
  ResampleGeometry g;
  g.planes = x.size(0) * x.size(1);
  Dims out_shape{x.size(0), x.size(1)};
  for (int64_t i = 0; i < n; ++i) {
    g.in[size_t(3 - n + i)] = x.size(2 + i);
    g.out[size_t(3 - n + i)] = out[size_t(i)];
    out_shape.push_back(out[size_t(i)]);
  }
  const DType ct = compute_dtype(x);
  // Captures by value: the backward calls it after this frame is gone.
  auto make_taps = [g, n, mode, align_corners, scales, antialias]<class T>(bool backward) {
    std::array<Taps<T>, 3> t;
    for (size_t a = 0; a < 3; ++a) {
      const int64_t i = int64_t(a) - (3 - n);
      if (i < 0) {
        t[a].index = {0};
        t[a].weight = {T(1)};
        continue;
      }
      std::optional<double> s;
      if (!scales.empty()) s = scales[size_t(i)];
      if (antialias) {
        t[a] = kernels::antialias_taps<T>(mode == ResampleMode::Cubic, g.in[a], g.out[a], align_corners, s);
        continue;
      }
      // torch's 2-d nearest forward indexes as its backward does (nearest_idx: a float scale,
      // the 2x shortcut); 1-d and 3-d use the generic kernel's helper.
      const bool idx_rule = backward || (mode == ResampleMode::Nearest && n == 2);
      t[a] = kernels::resample_taps<T>(mode, g.in[a], g.out[a], align_corners, s, idx_rule);
    }
    return t;
  };
  Tensor result;
  {
    autograd::NoGradGuard no_grad;
    const Tensor xc = x.to(ct).contiguous();
    Tensor y = empty(out_shape, ct);
    if (g.planes > 0)
      visit_compute(ct, [&]<class T>() {
        const auto t = make_taps.template operator()<T>(false);
        if (antialias) kernels::antialias_forward<T>(g, t[1], t[2], xc.data<T>(), y.data<T>());
        else kernels::resample_forward<T>(g, t, xc.data<T>(), y.data<T>());
      });
    result = y.to(x.dtype());
  }
  autograd::record(node, {&result}, {&x}, {},
                   [g, shape = Dims(x.sizes()), ct, make_taps, cubic = mode == ResampleMode::Cubic, antialias](
                       const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
                     const Tensor gy = grads[0].to(ct).contiguous();
                     Tensor gx = empty(shape, ct);
                     if (g.planes > 0)
                       visit_compute(ct, [&]<class T>() {
                         const auto t = make_taps.template operator()<T>(true);
                         if (antialias) kernels::antialias_backward<T>(g, t[1], t[2], gy.data<T>(), gx.data<T>());
                         else kernels::resample_backward<T>(g, t, cubic, gy.data<T>(), gx.data<T>());
                       });
                     return std::vector<Tensor>{gx};
                   });
  return in_layout_of(result, x);
}

// ---- unfold / fold ----
// A 2-d block geometry: kernel, dilation, padding, stride (one value or two each), checked as torch's.
struct Blocks {
  kernels::ConvGeometry g;
  int64_t batch = 1, channels = 0;
};

Dims pair_of(const char* op, const char* what, const Dims& v) {
  if (v.size() == 2) return v;
  FLB_CHECK(v.size() == 1, ValueError, "[", op, "] ", what, " must be an int or a pair of ints, got ", what, "=",
            dims_list(v));
  return {v[0], v[0]};
}

Blocks block_geometry(const char* op, const Dims& kernel_size, const Dims& dilation, const Dims& padding,
                      const Dims& stride) {
  const Dims k = pair_of(op, "kernel_size", kernel_size), d = pair_of(op, "dilation", dilation),
             p = pair_of(op, "padding", padding), s = pair_of(op, "stride", stride);
  FLB_CHECK(k[0] > 0 && k[1] > 0, ValueError, "[", op, "] kernel size should be greater than zero, but got "
            "kernel_height: ", k[0], " kernel_width: ", k[1]);
  FLB_CHECK(s[0] > 0 && s[1] > 0, ValueError, "[", op, "] stride should be greater than zero, but got dH: ", s[0],
            " dW: ", s[1]);
  FLB_CHECK(d[0] > 0 && d[1] > 0, ValueError, "[", op, "] dilation should be greater than zero, but got "
            "dilation_height: ", d[0], " dilation_width: ", d[1]);
  FLB_CHECK(p[0] >= 0 && p[1] >= 0, ValueError, "[", op, "] padding should be non-negative, but got pad_height: ",
            p[0], " pad_width: ", p[1]);
  Blocks b;
  for (size_t i = 0; i < 2; ++i) {
    b.g.kernel[1 + i] = k[i];
    b.g.dilation[1 + i] = d[i];
    b.g.pad[1 + i] = p[i];
    b.g.stride[1 + i] = s[i];
  }
  return b;
}

// The number of blocks along a dim of size `in` (torch's integer formula).
int64_t block_count(const kernels::ConvGeometry& g, size_t a, int64_t in) {
  return (in + 2 * g.pad[a] - (g.dilation[a] * (g.kernel[a] - 1) + 1)) / g.stride[a] + 1;
}

std::string geometry_str(const kernels::ConvGeometry& g) {
  auto two = [](const std::array<int64_t, 3>& v) { return "(" + std::to_string(v[1]) + ", " + std::to_string(v[2]) + ")"; };
  return "kernel_size=" + two(g.kernel) + ", dilation=" + two(g.dilation) + ", padding=" + two(g.pad) +
         ", stride=" + two(g.stride);
}

// from [batch, channels, *from_image] to [batch, *to_shape] one image at a time: unfold
// (im2col) or fold (col2im, into zeros).
Tensor blocks_apply(bool unfold, const Blocks& b, const Tensor& x, const Dims& shape) {
  const DType ct = compute_dtype(x);
  const kernels::ConvGeometry g = b.g;
  const int64_t C = b.channels, image = C * g.in_volume(), cols = C * g.kernel_volume() * g.out_volume();
  const Tensor xc = x.to(ct).contiguous();
  Tensor y = unfold ? empty(shape, ct) : zeros(shape, ct);
  visit_compute(ct, [&]<class T>() {
    const T* src = xc.data<T>();
    T* dst = y.data<T>();
    for (int64_t n = 0; n < b.batch; ++n) {
      if (unfold) kernels::unfold_image(g, src + n * image, C, dst + n * cols);
      else kernels::fold_image(g, src + n * cols, C, dst + n * image);
    }
  });
  return y;
}

// The primitive: forward one way, backward the other, recorded as `node`.
Tensor blocks_primitive(const char* node, bool unfold, const Blocks& b, const Tensor& x, const Dims& out_shape) {
  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    out = blocks_apply(unfold, b, x, out_shape).to(x.dtype());
  }
  autograd::record(node, {&out}, {&x}, {},
                   [b, unfold, in_shape = Dims(x.sizes())](const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
                     return std::vector<Tensor>{blocks_apply(!unfold, b, grads[0], in_shape)};
                   });
  return out;
}

}  // namespace

FLB_OP(unfold,
       (const Tensor& input, const Dims& kernel_size, const Dims& dilation, const Dims& padding, const Dims& stride),
       (input, kernel_size, dilation, padding, stride), Tensor) {
  const int64_t d = input.dim();
  bool ok = d == 3 || d == 4;
  for (int64_t i = d - 3; ok && i < d; ++i) ok = input.size(i) > 0;
  FLB_CHECK(ok, ValueError, "[unfold] Expected 3D or 4D (batch mode) tensor for input with possible 0 batch size "
            "and non-zero dimensions for input, but got: ", dims_list(Dims(input.sizes())));
  FLB_CHECK(input.is_floating_point(), TypeError, "[unfold] expected a floating point input, got ",
            dtype_name(input.dtype()));
  Blocks b = block_geometry("unfold", kernel_size, dilation, padding, stride);
  const int64_t H = input.size(-2), W = input.size(-1);
  b.batch = d == 4 ? input.size(0) : 1;
  b.channels = input.size(-3);
  b.g.in = {1, H, W};
  b.g.out = {1, block_count(b.g, 1, H), block_count(b.g, 2, W)};
  FLB_CHECK(b.g.out[1] >= 1 && b.g.out[2] >= 1, ValueError, "[unfold] Given input with spatial size (", H, ", ", W,
            "), ", geometry_str(b.g), ", calculated shape of the array of sliding blocks as (", b.g.out[1], ", ",
            b.g.out[2], "), but its components must be at least one.");
  Dims out_shape{b.channels * b.g.kernel_volume(), b.g.out_volume()};
  if (d == 4) out_shape.insert(0, b.batch);
  return blocks_primitive("Im2ColBackward0", true, b, input, out_shape);
}

FLB_OP(fold,
       (const Tensor& input, const Dims& output_size, const Dims& kernel_size, const Dims& dilation,
        const Dims& padding, const Dims& stride),
       (input, output_size, kernel_size, dilation, padding, stride), Tensor) {
  const int64_t d = input.dim();
  bool ok = d == 2 || d == 3;
  for (int64_t i = d - 2; ok && i < d; ++i) ok = input.size(i) > 0;
  FLB_CHECK(ok, ValueError, "[fold] Expected 2D or 3D (batch mode) tensor for input with possible 0 batch size "
            "and non-zero dimensions for input, but got: ", dims_list(Dims(input.sizes())));
  FLB_CHECK(input.is_floating_point(), TypeError, "[fold] expected a floating point input, got ",
            dtype_name(input.dtype()));
  const Dims o = pair_of("fold", "output_size", output_size);
  Blocks b = block_geometry("fold", kernel_size, dilation, padding, stride);
  FLB_CHECK(o[0] > 0 && o[1] > 0, ValueError, "[fold] output_size should be greater than zero, but got "
            "output_height: ", o[0], " output_width: ", o[1]);
  const int64_t rows = input.size(-2), L = input.size(-1), kvol = b.g.kernel_volume();
  FLB_CHECK(rows % kvol == 0, ValueError, "[fold] Expected size of input's dimension 1 to be divisible by the "
            "product of kernel_size, but got input.size(1)=", rows, " and kernel_size=(", b.g.kernel[1], ", ",
            b.g.kernel[2], ")");
  b.batch = d == 3 ? input.size(0) : 1;
  b.channels = rows / kvol;
  b.g.in = {1, o[0], o[1]};
  b.g.out = {1, block_count(b.g, 1, o[0]), block_count(b.g, 2, o[1])};
  const std::string where = "Given output_size=(" + std::to_string(o[0]) + ", " + std::to_string(o[1]) + "), " +
                            geometry_str(b.g);
  FLB_CHECK(b.g.out[1] >= 1 && b.g.out[2] >= 1, ValueError, "[fold] ", where,
            ", calculated shape of the array of sliding blocks as (", b.g.out[1], ", ", b.g.out[2],
            "), which is too small (non-positive)");
  FLB_CHECK(L == b.g.out_volume(), ValueError, "[fold] ", where, ", expected size of input's dimension 2 to match "
            "the calculated number of sliding blocks ", b.g.out[1], " * ", b.g.out[2], " = ", b.g.out_volume(),
            ", but got input.size(2)=", L, ".");
  Dims out_shape{b.channels, o[0], o[1]};
  if (d == 3) out_shape.insert(0, b.batch);
  return blocks_primitive("Col2ImBackward0", false, b, input, out_shape);
}

FLB_OP(interpolate,
       (const Tensor& input, const std::optional<Dims>& size, const std::optional<std::vector<double>>& scale_factor,
        const std::string& mode, std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor,
        bool antialias),
       (input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias), Tensor) {
  const bool nearest_like = mode == "nearest" || mode == "area" || mode == "nearest-exact";
  FLB_CHECK(!(nearest_like && align_corners), ValueError,
            "[interpolate] align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear (got mode '", mode, "')");
  const bool ac = align_corners.value_or(false);
  const int64_t dim = input.dim() - 2;
  const Dims spatial = dim > 0 ? Dims(input.sizes().data() + 2, size_t(dim)) : Dims{};
  FLB_CHECK(!(size && scale_factor), ValueError, "[interpolate] only one of size or scale_factor should be defined");
  FLB_CHECK(size || scale_factor, ValueError, "[interpolate] either size or scale_factor should be defined");
  Dims out;
  std::vector<double> scales;
  if (size) {
    FLB_CHECK(int64_t(size->size()) == dim, ValueError,
              "[interpolate] Input and output must have the same number of spatial dimensions, but got input with "
              "spatial dimensions of ", dims_list(spatial), " and output size of ", dims_list(*size),
              ". Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
              "format.");
    out = *size;
  } else {
    FLB_CHECK(int64_t(scale_factor->size()) == dim, ValueError,
              "[interpolate] Input and scale_factor must have the same number of spatial dimensions, but got input "
              "with spatial dimensions of ", dims_list(spatial), " and scale_factor of shape ",
              list_str(*scale_factor), ". Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
              "scale_factor in (s1, s2, ...,sK) format.");
    scales = *scale_factor;
  }
  FLB_CHECK(!(recompute_scale_factor.value_or(false) && size), ValueError,
            "[interpolate] recompute_scale_factor is not meaningful with an explicit size.");
  const bool recompute = recompute_scale_factor.value_or(false) || (mode == "area" && !size);
  if (!size) {
    // torch: floor(in * scale) as the output size; the scales map indices unless recomputed.
    for (int64_t i = 0; i < dim; ++i) out.push_back(int64_t(std::floor(double(spatial[size_t(i)]) * scales[size_t(i)])));
    if (recompute) scales.clear();
  }
  FLB_CHECK(!antialias || ((mode == "bilinear" || mode == "bicubic") && input.dim() == 4), ValueError,
            "[interpolate] Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor "
            "as input");
  const int64_t d = input.dim();
  auto need = [&](const char* m, int64_t want) {
    FLB_CHECK(d == want, NotImplementedError, "[interpolate] Got ", d, "D input, but ", m, " mode needs ", want,
              "D input (input of shape ", shape_str(input.sizes()), ")");
  };
  FLB_CHECK(d >= 3 && d <= 5 && (nearest_like || mode == "linear" || mode == "bilinear" || mode == "bicubic" ||
                                 mode == "trilinear"),
            NotImplementedError, "[interpolate] Input Error: Only 3D, 4D and 5D input Tensors supported (got ", d,
            "D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got ",
            mode, ")");
  if (mode == "area") {
    if (d == 3) return adaptive_avg_pool1d(input, out);
    if (d == 4) return adaptive_avg_pool2d(input, out);
    return adaptive_avg_pool3d(input, out);
  }
  // (the node name is kept as a pointer: literals only)
  if (mode == "nearest")
    return upsample(d == 3 ? "UpsampleNearest1DBackward0" : d == 4 ? "UpsampleNearest2DBackward0"
                                                                   : "UpsampleNearest3DBackward0",
                    ResampleMode::Nearest, input, out, false, scales);
  if (mode == "nearest-exact")
    return upsample(d == 3 ? "UpsampleNearestExact1DBackward0" : d == 4 ? "UpsampleNearestExact2DBackward0"
                                                                        : "UpsampleNearestExact3DBackward0",
                    ResampleMode::NearestExact, input, out, false, scales);
  if (mode == "linear") need("linear", 3);
  if (mode == "bilinear") need("bilinear", 4);
  if (mode == "bicubic") need("bicubic", 4);
  if (mode == "trilinear") need("trilinear", 5);
  if (antialias)
    return mode == "bicubic"
               ? upsample("UpsampleBicubic2DAaBackward0", ResampleMode::Cubic, input, out, ac, scales, true)
               : upsample("UpsampleBilinear2DAaBackward0", ResampleMode::Linear, input, out, ac, scales, true);
  if (mode == "bicubic")
    return upsample("UpsampleBicubic2DBackward0", ResampleMode::Cubic, input, out, ac, scales);
  const char* node = d == 3 ? "UpsampleLinear1DBackward0" : d == 4 ? "UpsampleBilinear2DBackward0"
                                                                   : "UpsampleTrilinear3DBackward0";
  return upsample(node, ResampleMode::Linear, input, out, ac, scales);
}

namespace {
// Note [Pixel shuffle]: a pure permutation, copied directly, a row of the large side at a
// time (the reshape of a permuted view went through the generic strided copy, whose
// innermost run is r elements). Shuffle: x [P, r, r, h, w] -> y [P, h, r, w, r]; unshuffle:
// the inverse. Each output element is written once; the backward of each is the other.
template <class E>
void shuffle_rows(const E* x, E* y, int64_t planes, int64_t r, int64_t h, int64_t w, bool up) {
  // h, w: the small side's spatial size; row (p, hh, i) of the large side is w * r long.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(w * r, 1));
  parallel_for(0, planes * h * r, grain, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t i = row % r, hh = (row / r) % h, p = row / (r * h);
      for (int64_t j = 0; j < r; ++j) {
        const int64_t small = (((p * r + i) * r + j) * h + hh) * w, large = row * w * r + j;
        if (up)
          for (int64_t k = 0; k < w; ++k) y[large + k * r] = x[small + k];
        else
          for (int64_t k = 0; k < w; ++k) y[small + k] = x[large + k * r];
      }
    }
  });
}

// up: [*, C, H, W] -> [*, C / r^2, H r, W r]; down: [*, C, H, W] -> [*, C r^2, H / r, W / r].
Tensor shuffle_pixels(const Tensor& input, int64_t r, bool up) {
  const Tensor x = input.contiguous();
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  Dims shape(x.sizes().data(), size_t(x.dim() - 3));
  int64_t batch = 1;
  for (int64_t d : shape) batch *= d;
  const int64_t planes = batch * (up ? c / (r * r) : c), sh = up ? h : h / r, sw = up ? w : w / r;
  for (int64_t v : {up ? c / (r * r) : c * r * r, up ? h * r : h / r, up ? w * r : w / r}) shape.push_back(v);
  Tensor y = empty(shape, x.dtype());
  auto run = [&](auto tag) {
    using E = decltype(tag);
    shuffle_rows(static_cast<const E*>(x.data_ptr()), static_cast<E*>(y.data_ptr()), planes, r, sh, sw, up);
  };
  switch (itemsize(x.dtype())) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;
  }
  autograd::record(up ? "PixelShuffleBackward0" : "PixelUnshuffleBackward0", {&y}, {&input}, {},
                   [r, up](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                     return std::vector<Tensor>{shuffle_pixels(g[0], r, !up)};
                   });
  return y;
}
}  // namespace

FLB_OP(pixel_shuffle, (const Tensor& input, int64_t upscale_factor), (input, upscale_factor), Tensor) {
  FLB_CHECK(input.dim() >= 3, ValueError, "[pixel_shuffle] expects input to have at least 3 dimensions, but got "
            "input with ", input.dim(), " dimension(s) (shape ", shape_str(input.sizes()), ")");
  FLB_CHECK(upscale_factor > 0, ValueError, "[pixel_shuffle] expects a positive upscale_factor, but got ",
            upscale_factor);
  const int64_t r = upscale_factor, c = input.size(-3);
  FLB_CHECK(c % (r * r) == 0, ValueError, "[pixel_shuffle] expects its input's 'channel' dimension to be divisible "
            "by the square of upscale_factor, but input.size(-3)=", c, " is not divisible by ", r * r,
            " (input of shape ", shape_str(input.sizes()), ")");
  return shuffle_pixels(input, r, true);
}

FLB_OP(pixel_unshuffle, (const Tensor& input, int64_t downscale_factor), (input, downscale_factor), Tensor) {
  FLB_CHECK(input.dim() >= 3, ValueError, "[pixel_unshuffle] expects input to have at least 3 dimensions, but got "
            "input with ", input.dim(), " dimension(s) (shape ", shape_str(input.sizes()), ")");
  FLB_CHECK(downscale_factor > 0, ValueError, "[pixel_unshuffle] expects a positive downscale_factor, but got ",
            downscale_factor);
  const int64_t r = downscale_factor, h = input.size(-2), w = input.size(-1);
  FLB_CHECK(h % r == 0, ValueError, "[pixel_unshuffle] expects height to be divisible by downscale_factor, but "
            "input.size(-2)=", h, " is not divisible by ", r, " (input of shape ", shape_str(input.sizes()), ")");
  FLB_CHECK(w % r == 0, ValueError, "[pixel_unshuffle] expects width to be divisible by downscale_factor, but "
            "input.size(-1)=", w, " is not divisible by ", r, " (input of shape ", shape_str(input.sizes()), ")");
  return shuffle_pixels(input, r, false);
}

}  // namespace flambeau::nn::functional
