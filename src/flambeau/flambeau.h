// flambeau: the one header to include.
#pragma once
#include "flambeau/autograd/autograd.h"
#include "flambeau/core/allocator.h"
#include "flambeau/core/generator.h"
#include "flambeau/core/parallel.h"
#include "flambeau/core/tensor.h"
#include "flambeau/nn/attention.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/nn/module.h"
#include "flambeau/nn/modules.h"
#include "flambeau/ops/ops.h"
#include "flambeau/optim/optim.h"
