#pragma once

// Tensors for C++ callers: make_tensor_ptr({1, 3, 224, 224}, data).
#include <executorch/extension/tensor/tensor_ptr.h>
