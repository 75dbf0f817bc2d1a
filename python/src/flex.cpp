// flambeau._C._flex: FlexAttention's C++ pieces (native mask/score mods, BlockMask, the
// kernel), wrapped by flambeau.nn.attention.flex_attention with PyTorch's names.
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include "bindings.h"
#include "flambeau/compile/mask_mod.h"
#include "flambeau/compile/score_mod.h"
#include "flambeau/nn/flex_attention.h"

namespace flambeau::python {
namespace {

namespace fa = nn::attention;

// Python-side handles of the type-erased mods.
struct PyMaskMod {
  fa::MaskModPtr ptr;
};
struct PyScoreMod {
  fa::ScoreModPtr ptr;
};

template <class T, class P>
std::vector<P> ptrs(const std::vector<T>& v) {
  std::vector<P> r;
  for (const auto& x : v) r.push_back(x.ptr);
  return r;
}

nb::object opt(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }

// compile(fn's tensor form, &why) on a Python mod: (the native mod, "") or (null, why not).
template <class Compile>
auto compiled(Compile compile, nb::object fn) {
  auto holder = std::make_shared<nb::object>(std::move(fn));
  const compiler::TensorFn traced = [holder](const std::vector<Tensor>& in) {
    nb::tuple args = nb::steal<nb::tuple>(PyTuple_New(Py_ssize_t(in.size())));
    for (size_t i = 0; i < in.size(); ++i) PyTuple_SET_ITEM(args.ptr(), Py_ssize_t(i), nb::cast(in[i]).release().ptr());
    return std::vector<Tensor>{nb::cast<Tensor>((*holder)(*args))};
  };
  std::string why;
  decltype(compile(traced, &why)) mod;
  try {
    mod = compile(traced, &why);
  } catch (const std::exception& e) {  // the function's own error, or no compiler: the caller's path
    why = e.what();
  }
  return std::pair{mod, why};
}

}  // namespace

void bind_flex(nb::module_& m) {
  nb::module_ fm = m.def_submodule("_flex", "FlexAttention kernels and block masks (see flambeau.nn.attention)");
  nb::class_<PyMaskMod>(fm, "MaskMod")
      .def_prop_ro("name", [](const PyMaskMod& p) { return p.ptr->name(); })
      .def("__repr__", [](const PyMaskMod& p) { return "<native mask_mod " + p.ptr->name() + ">"; });
  nb::class_<PyScoreMod>(fm, "ScoreMod")
      .def_prop_ro("name", [](const PyScoreMod& p) { return p.ptr->name(); })
      .def_prop_ro("captured", [](const PyScoreMod& p) { return p.ptr->captured(); })
      .def("__repr__", [](const PyScoreMod& p) { return "<native score_mod " + p.ptr->name() + ">"; });

  fm.def("compile_mask_mod", [](nb::object fn) {
    // (native mask, "") or (None, why not): fn traced on index tensors, generated as C++.
    auto [mask, why] = compiled(compiler::compile_mask_mod, std::move(fn));
    return mask ? nb::make_tuple(PyMaskMod{mask}, "") : nb::make_tuple(nb::none(), why);
  }, "fn"_a);
  fm.def("compile_score_mod", [](nb::object fn) {
    // (native score_mod, "") or (None, why not): fn traced on a score tile and index tensors.
    auto [mod, why] = compiled(compiler::compile_score_mod, std::move(fn));
    return mod ? nb::make_tuple(PyScoreMod{mod}, "") : nb::make_tuple(nb::none(), why);
  }, "fn"_a);
  fm.def("noop_mask", [] { return PyMaskMod{fa::noop_mask()}; });
  fm.def("causal_mask", [] { return PyMaskMod{fa::causal_mask()}; });
  fm.def("sliding_window_mask", [](int64_t w) { return PyMaskMod{fa::sliding_window_mask(w)}; }, "window"_a);
  fm.def("prefix_lm_mask", [](int64_t n) { return PyMaskMod{fa::prefix_lm_mask(n)}; }, "prefix_length"_a);
  fm.def("document_mask", [](const Tensor& ids) { return PyMaskMod{fa::document_mask(ids)}; }, "doc_ids"_a);
  fm.def("and_masks", [](const std::vector<PyMaskMod>& v) { return PyMaskMod{fa::and_masks(ptrs<PyMaskMod, fa::MaskModPtr>(v))}; });
  fm.def("or_masks", [](const std::vector<PyMaskMod>& v) { return PyMaskMod{fa::or_masks(ptrs<PyMaskMod, fa::MaskModPtr>(v))}; });
  fm.def("alibi", [](const Tensor& s) { return PyScoreMod{fa::alibi(s)}; }, "slopes"_a);
  fm.def("tanh_softcap", [](double c) { return PyScoreMod{fa::tanh_softcap(c)}; }, "cap"_a);
  fm.def("relative_bias", [](const Tensor& t) { return PyScoreMod{fa::relative_bias(t)}; }, "table"_a);
  fm.def("chain", [](const std::vector<PyScoreMod>& v) {
    return PyScoreMod{fa::chain_score_mods(ptrs<PyScoreMod, fa::ScoreModPtr>(v))};
  });

  nb::class_<fa::BlockMask>(fm, "BlockMask")
      .def_prop_ro("kv_num_blocks", [](const fa::BlockMask& b) { return opt(b.kv_num_blocks); })
      .def_prop_ro("kv_indices", [](const fa::BlockMask& b) { return opt(b.kv_indices); })
      .def_prop_ro("full_kv_num_blocks", [](const fa::BlockMask& b) { return opt(b.full_kv_num_blocks); })
      .def_prop_ro("full_kv_indices", [](const fa::BlockMask& b) { return opt(b.full_kv_indices); })
      .def_prop_ro("q_num_blocks", [](const fa::BlockMask& b) { return opt(b.q_num_blocks); })
      .def_prop_ro("q_indices", [](const fa::BlockMask& b) { return opt(b.q_indices); })
      .def_prop_ro("full_q_num_blocks", [](const fa::BlockMask& b) { return opt(b.full_q_num_blocks); })
      .def_prop_ro("full_q_indices", [](const fa::BlockMask& b) { return opt(b.full_q_indices); })
      .def_ro("q_len", &fa::BlockMask::q_len)
      .def_ro("kv_len", &fa::BlockMask::kv_len)
      .def_ro("q_block", &fa::BlockMask::q_block)
      .def_ro("kv_block", &fa::BlockMask::kv_block)
      .def_ro("sliced", &fa::BlockMask::sliced)
      .def("sparsity", &fa::BlockMask::sparsity)
      .def("numel", &fa::BlockMask::numel)
      .def("to_dense", &fa::BlockMask::to_dense)
      .def("slice", &fa::BlockMask::slice, "b0"_a, "b1"_a, "h0"_a, "h1"_a)
      .def("adjust", &fa::BlockMask::adjust, "new_q_len"_a, "new_kv_len"_a)
      .def("to_string", &fa::BlockMask::to_string);

  fm.def("create_block_mask", [](const PyMaskMod& mm, int64_t B, int64_t H, int64_t L, int64_t S, int64_t qbs,
                                 int64_t kbs) {
    nb::gil_scoped_release release;
    return fa::create_block_mask(mm.ptr, B, H, L, S, qbs, kbs);
  }, "mask_mod"_a, "B"_a, "H"_a, "Q_LEN"_a, "KV_LEN"_a, "q_block"_a = 128, "kv_block"_a = 128);
  // rows(b, h, q0, n) -> bool tensor [n, KV_LEN]: a Python mask_mod evaluated block row by row.
  fm.def("create_block_mask_from_rows", [](nb::callable rows, int64_t B, int64_t H, int64_t L, int64_t S, int64_t qbs,
                                           int64_t kbs) {
    return fa::create_block_mask_from_rows(
        [&](int64_t b, int64_t h, int64_t q0, int64_t n) {
          Tensor t = callback_tensor(rows(b, h, q0, n), "create_block_mask");
          FLB_CHECK(t.defined(), TypeError, "[create_block_mask] mask_mod must return a Tensor, got None");
          return t;
        },
        B, H, L, S, qbs, kbs);
  }, "rows"_a, "B"_a, "H"_a, "Q_LEN"_a, "KV_LEN"_a, "q_block"_a = 128, "kv_block"_a = 128);
  fm.def("from_kv_blocks", [](const Tensor& n, const Tensor& i, std::optional<Tensor> fn, std::optional<Tensor> fi,
                              int64_t qbs, int64_t kbs, std::optional<PyMaskMod> mm,
                              std::optional<std::pair<int64_t, int64_t>> lens) {
    return fa::from_kv_blocks(n, i, fn.value_or(Tensor()), fi.value_or(Tensor()), qbs, kbs,
                              mm ? mm->ptr : nullptr, lens);
  }, "kv_num_blocks"_a, "kv_indices"_a, "full_kv_num_blocks"_a = nb::none(), "full_kv_indices"_a = nb::none(),
     "q_block"_a = 128, "kv_block"_a = 128, "mask_mod"_a = nb::none(), "seq_lengths"_a = nb::none());
  fm.def("flex_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<PyScoreMod> mod,
                              std::optional<fa::BlockMask> bm, std::optional<double> scale, bool gqa, bool lse) {
    nb::gil_scoped_release release;
    auto r = fa::flex_attention(q, k, v, mod ? mod->ptr : nullptr, bm, scale, gqa, lse);
    return std::pair{r.first, r.second.defined() ? std::optional<Tensor>(r.second) : std::nullopt};
  }, "query"_a, "key"_a, "value"_a, "score_mod"_a = nb::none(), "block_mask"_a = nb::none(), "scale"_a = nb::none(),
     "enable_gqa"_a = false, "return_lse"_a = false);
}

}  // namespace flambeau::python
