// Ops whose kernels are C functions (custom ops of extensions): the boxed kernel that
// hands the registry's arguments to the C kernel as FlbValues, reports the call to the op
// hook, checks the results and records the backward kernel for autograd.
#include <list>

#include "flambeau/autograd/function.h"
#include "flambeau/autograd/node.h"
#include "flambeau/core/error.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/small_vector.h"
#include "flambeau/stable/extension.h"

namespace flambeau::stable {

namespace {

struct COp {
  OpSchema schema;
  std::string name;       // "mylib::fused_bias_gelu": the op hook keeps a view of it
  std::string node_name;  // "FusedBiasGeluBackward0"
  FlbKernel kernel;
  FlbBackwardKernel backward;
  FlbShapeFn shape;
  void* user_data;
};

// PyTorch's node name of an op: its name in CamelCase + "Backward0".
std::string node_name_of(const std::string& op) {
  std::string out;
  bool up = true;
  for (char c : op) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out + "Backward0";
}

// The registry's arguments as FlbValues (borrowed handles), and what they point into.
// (Lists: no allocation unless used, and stable addresses.)
struct CArgs {
  SmallVec<FlbValue, 8> values;
  std::list<Tensor> wrapped;  // numbers given for Tensor arguments
  std::list<Dims> lists;      // an int given for an int[] argument
  std::list<std::vector<FlbTensor>> tensor_lists;

  CArgs(const OpSchema& schema, const std::vector<Value>& args) : values(args.size()) {
    for (size_t i = 0; i < args.size(); ++i) values[i] = box(schema.arguments[i], args[i]);
  }

  FlbValue box(const SchemaArg& a, const Value& v) {
    FlbValue out{};
    if (std::holds_alternative<std::monostate>(v)) return out;  // FLB_VALUE_NONE
    if (a.list && a.kind == ArgKind::Tensor) {
      auto& handles = tensor_lists.emplace_back();
      for (const Tensor& t : std::get<std::vector<Tensor>>(v)) handles.push_back(borrow(t));
      out.kind = FLB_VALUE_TENSOR_LIST;
      out.v.tensors = {handles.data(), int64_t(handles.size())};
      return out;
    }
    if (a.list) {
      const Dims* d = std::get_if<Dims>(&v);
      if (!d) d = &lists.emplace_back(detail::Unbox<Dims>::get(v));
      out.kind = FLB_VALUE_INT_LIST;
      out.v.ints = {d->data(), int64_t(d->size())};
      return out;
    }
    switch (a.kind) {
      case ArgKind::Tensor: {
        const Tensor* t = std::get_if<Tensor>(&v);
        if (!t) t = &wrapped.emplace_back(detail::Unbox<Tensor>::get(v));
        out.kind = FLB_VALUE_TENSOR, out.v.tensor = borrow(*t);
        return out;
      }
      case ArgKind::MemoryFormat:
      case ArgKind::Int: out.kind = FLB_VALUE_INT, out.v.i = std::get<int64_t>(v); return out;
      case ArgKind::Float: out.kind = FLB_VALUE_FLOAT, out.v.f = detail::Unbox<double>::get(v); return out;
      case ArgKind::Bool: out.kind = FLB_VALUE_BOOL, out.v.b = std::get<bool>(v); return out;
      case ArgKind::Str: out.kind = FLB_VALUE_STR, out.v.str = std::get<std::string>(v).c_str(); return out;
      case ArgKind::ScalarType: out.kind = FLB_VALUE_DTYPE, out.v.dtype = dtype_code(std::get<DType>(v)); return out;
      case ArgKind::Generator:
        out.kind = FLB_VALUE_GENERATOR, out.v.generator = borrow(*std::get<op_hook::Opaque>(v).generator);
        return out;
      case ArgKind::Scalar:
        if (auto* i = std::get_if<int64_t>(&v)) out.kind = FLB_VALUE_INT, out.v.i = *i;
        else if (auto* b = std::get_if<bool>(&v)) out.kind = FLB_VALUE_BOOL, out.v.b = *b;
        else out.kind = FLB_VALUE_FLOAT, out.v.f = detail::Unbox<Scalar>::get(v).to<double>();
        return out;
    }
    return out;
  }
};

// Takes the tensors a C function stored in `slots` (NULL where none): all of them, even
// when it failed. On failure raises "[op] <what> failed: <message>".
template <class Slots>
std::vector<Tensor> take_results(Slots& slots, FlbStatus status, const std::string& op,
                                 const char* what) {
  std::vector<Tensor> out;
  for (FlbTensor& s : slots) out.push_back(s ? take(s) : Tensor()), s = nullptr;
  if (status != FLB_OK) {
    const std::string& msg = last_error();
    raise_status(status, detail::str_cat("[", op, "] the ", what, " failed: ", msg.empty() ? "(no message)" : msg));
  }
  return out;
}

void check_results(const COp& op, const std::vector<Tensor>& results, const std::vector<Value>& args,
                   const CArgs& c_args) {
  for (size_t k = 0; k < results.size(); ++k) {
    FLB_CHECK(results[k].defined(), Error, "[", op.name, "] the kernel returned FLB_OK but left result ", k, " unset");
    for (const Value& v : args)
      if (auto* t = std::get_if<Tensor>(&v))
        FLB_CHECK(!t->defined() || t->storage() != results[k].storage(), Error, "[", op.name, "] result ", k,
                  " shares memory with an argument: a custom op's kernel must return new tensors");
  }
  if (!op.shape) return;
  std::vector<FlbTensorMeta> metas(results.size());
  const FlbStatus st = op.shape(c_args.values.data(), int64_t(c_args.values.size()), metas.data(),
                                int64_t(metas.size()), op.user_data);
  if (st != FLB_OK) raise_status(st, detail::str_cat("[", op.name, "] the shape function failed: ", last_error()));
  for (size_t k = 0; k < results.size(); ++k) {
    const FlbTensorMeta& m = metas[k];
    FLB_CHECK(m.dim >= 0 && m.dim <= FLB_MAX_DIMS, Error, "[", op.name, "] the shape function gave result ", k,
              " dim ", m.dim);
    const Dims expected(std::vector<int64_t>(m.sizes, m.sizes + m.dim));
    FLB_CHECK(expected == results[k].sizes() && m.dtype == dtype_code(results[k].dtype()), Error, "[", op.name,
              "] the kernel returned result ", k, " of shape ", shape_str(results[k].sizes()), " and dtype ",
              dtype_name(results[k].dtype()), ", but the shape function says ", shape_str(expected), " and dtype ",
              dtype_name(dtype_from_code(m.dtype, op.name.c_str())));
  }
}

// Records the call for autograd: the backward kernel gets the gradients, the arguments
// (tensors as saved) and the results.
void record_backward(const std::shared_ptr<const COp>& op, const std::vector<Value>& args,
                     std::vector<Tensor>& results) {
  if (!autograd::grad_mode_enabled()) return;
  bool any = false;
  for (const Value& v : args)
    if (auto* t = std::get_if<Tensor>(&v)) any = any || autograd::requires_grad(*t);
  if (!any) return;
  std::vector<const Tensor*> inputs;
  std::vector<size_t> input_arg;  // schema argument of each input
  for (size_t i = 0; i < args.size(); ++i)
    if (auto* t = std::get_if<Tensor>(&args[i]); t && op->schema.arguments[i].kind == ArgKind::Tensor)
      inputs.push_back(t), input_arg.push_back(i);
  std::vector<Tensor> saved;
  for (const Tensor* t : inputs) saved.push_back(*t);
  for (const Tensor& r : results) saved.push_back(r);
  std::vector<Value> others = args;  // the non-tensor arguments; tensors come from `saved`
  for (size_t i : input_arg) others[i] = std::monostate{};
  std::vector<Tensor*> outs;
  for (Tensor& r : results) outs.push_back(&r);
  autograd::record_many(
      op->node_name.c_str(), outs, inputs, std::move(saved),
      [op, others, input_arg](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
        FLB_CHECK(op->backward, Error, "[", op->name, "] has no backward kernel: its library registered none, so ",
                  op->name, " cannot be differentiated");
        std::vector<Value> args = others;
        for (size_t k = 0; k < input_arg.size(); ++k) args[input_arg[k]] = saved[k];
        const std::vector<Tensor> outputs(saved.begin() + std::ptrdiff_t(input_arg.size()), saved.end());
        CArgs c_args(op->schema, args);
        std::vector<FlbTensor> grad_handles, output_handles, slots(args.size(), nullptr);
        for (const Tensor& g : grads) grad_handles.push_back(borrow(g));
        for (const Tensor& o : outputs) output_handles.push_back(borrow(o));
        FlbStatus st;
        {
          autograd::NoGradGuard no_grad;
          op_hook::Internal internal;
          st = op->backward(grad_handles.data(), int64_t(grad_handles.size()), c_args.values.data(),
                            int64_t(args.size()), output_handles.data(), slots.data(), op->user_data);
        }
        std::vector<Tensor> per_arg = take_results(slots, st, op->name, "backward kernel");
        std::vector<Tensor> grad_inputs;
        for (size_t i : input_arg) grad_inputs.push_back(per_arg[i]);
        return grad_inputs;
      });
  // The backward kernel runs without autograd: under create_graph its gradients raise when
  // differentiated again (Note [Gradients without a graph]).
  if (auto* node = results.empty() ? nullptr : dynamic_cast<autograd::FunctionNode*>(results[0].grad_fn().get()))
    node->once_differentiable = true;
}

std::vector<Value> run(const std::shared_ptr<const COp>& op, const std::vector<Value>& args) {
  // Reported to the op hook as a built-in op is (op_hook::call's frame, arguments boxed already).
  op_hook::detail::Frame frame;
  if (op_hook::active()) [[unlikely]] {
    frame.entered = true;
    if (op_hook::detail::depth()++ == 0)
      frame.pending = new op_hook::OpCall{op->name, args, {}, op_hook::now_ns(), op_hook::detail::next_correlation()};
  }
  CArgs c_args(op->schema, args);
  SmallVec<FlbTensor, 4> slots(op->schema.returns.size(), nullptr);
  FlbStatus st;
  {
    autograd::NoGradGuard no_grad;
    op_hook::Internal internal;
    st = op->kernel(c_args.values.data(), int64_t(c_args.values.size()), slots.data(), int64_t(slots.size()),
                    op->user_data);
  }
  std::vector<Tensor> results = take_results(slots, st, op->name, "kernel");
  check_results(*op, results, args, c_args);
  record_backward(op, args, results);
  if (frame.pending) [[unlikely]]
    frame.finish(results);
  return std::vector<Value>(std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
}

}  // namespace

OpSchema check_c_op(const std::string& schema, FlbKernel kernel) {
  OpSchema parsed = parse_schema(schema);
  const std::string name = parsed.qualified_name();
  FLB_CHECK(!parsed.ns.empty(), ValueError, "[register_op] '", name,
            "' has no namespace: a custom op is named 'mylib::", parsed.name, "'");
  FLB_CHECK(kernel, ValueError, "[register_op] no kernel given for '", name, "'");
  for (const SchemaArg& r : parsed.returns)
    FLB_CHECK(r.kind == ArgKind::Tensor && !r.list && !r.optional, ValueError, "[register_op] '", name,
              "': every result of a C op must be a Tensor, got ", arg_kind_name(r.kind), r.list ? "[]" : "",
              r.optional ? "?" : "");
  FLB_CHECK(!find_op(name), ValueError, "[register_op] an op named '", name, "' is already registered");
  return parsed;
}

BoxedKernel c_op_kernel(const OpSchema& schema, FlbKernel kernel, FlbBackwardKernel backward, FlbShapeFn shape,
                        void* user_data) {
  auto op = std::make_shared<const COp>(COp{schema, schema.qualified_name(), node_name_of(schema.name), kernel,
                                            backward, shape, user_data});
  return [op](const std::vector<Value>& args) { return run(op, args); };
}

void register_c_op(const std::string& schema, FlbKernel kernel, FlbBackwardKernel backward, FlbShapeFn shape,
                   void* user_data) {
  const OpSchema parsed = check_c_op(schema, kernel);
  register_op(schema, c_op_kernel(parsed, kernel, backward, shape, user_data));
}

}  // namespace flambeau::stable
