"""On a GPU machine with torch and the wheel installed, from a checkout: the operator test model of
tests/cuda_export_test.py (slices, selects, concatenation, padding, index_select, resampling, pooling,
activations, 1-D and depthwise convolution) through CudaBackend against torch, in each dtype.

    python3 tools/gpu/ops_check.py .
"""
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
from executorch.export import export
from executorch.runtime import Runtime
from tests.cuda_export_test import VisionOps

torch.manual_seed(0)
model, x = VisionOps().eval(), torch.randn(2, 4, 8, 8)
with torch.no_grad():
    want = model(x).numpy()
for dtype, bound in ((torch.float32, 1e-4), (torch.float16, 1e-2), (torch.bfloat16, 6e-2)):
    pte = export(model, (x,), backend="cuda", dtype=dtype)
    method = Runtime.get().load_program(pte).load_method()
    xi = x.to(dtype)
    got = method.execute([xi.numpy() if dtype != torch.bfloat16 else xi])[0]
    got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, dtype=np.float32)
    with torch.no_grad():
        ref = model(xi.float()).numpy()
    err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
    print(f"VisionOps {str(dtype)[6:]}: max |ours - torch| / max(1, max |torch|) = {err:.2e} (bound {bound})")
    if err > bound:
        raise SystemExit(f"VisionOps {dtype}: out of bounds")
