// Recording a differentiable op: ops call record() after computing their outputs, with a
// backward function. FunctionNode runs it, then reduces each input gradient to its
// input's shape (summing broadcast dims) and casts it to the input's dtype, so formulas
// may return gradients in the output's broadcast shape.
#pragma once
#include <functional>
#include <initializer_list>

#include "flambeau/autograd/node.h"

namespace flambeau::autograd {

// grads: one per output (zeros where none flowed); saved: the tensors given to record(),
// checked against in-place changes. Returns one gradient per input (undefined: none).
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads, const std::vector<Tensor>& saved)>;

class FunctionNode : public Node {
 public:
  FunctionNode(const char* name, BackwardFn fn, std::vector<Tensor> saved, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  void release_saved() override;
  // The backward runs a kernel, not ops: under create_graph its gradients get a node that
  // raises when differentiated (Note [Gradients without a graph] in function.cpp).
  bool once_differentiable = false;

 private:
  const char* name_;
  BackwardFn fn_;
  std::vector<SavedTensor> saved_;
  std::vector<Dims> input_shapes_, output_shapes_;
  std::vector<DType> input_dtypes_, output_dtypes_;
};

// Makes `outputs` the results of the op `name` (PyTorch's node name, e.g. "ExpBackward0") over
// `inputs` when grad mode is on, an input requires grad and an output is floating (integer
// and bool results have no gradient, as in PyTorch); else does nothing. Undefined input
// pointers are allowed.
void record(const char* name, std::initializer_list<Tensor*> outputs, std::initializer_list<const Tensor*> inputs,
            std::vector<Tensor> saved, BackwardFn fn);

// record() for a number of inputs known only at run time.
void record_many(const char* name, const std::vector<Tensor*>& outputs, const std::vector<const Tensor*>& inputs,
                 std::vector<Tensor> saved, BackwardFn fn);

// g summed over the dims where it was broadcast from `shape`.
Tensor sum_to(const Tensor& g, const Dims& shape);

}  // namespace flambeau::autograd
