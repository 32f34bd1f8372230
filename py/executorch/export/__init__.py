"""Exports a torch.nn.Module to an executorch program (.pte bytes).

    from executorch.export import export
    pte = export(model, (torch.randn(1, 3, 32, 32),))

torch.export captures the graph; PyTorch's core-ATen decompositions reduce it to the operators the
CPU kernels implement; constant subgraphs are folded; a memory planner packs every intermediate
tensor into one planned buffer. Operators with no kernel are an UnsupportedOperatorError naming each of them.
torch is needed here only (`pip install executorch[export]`); the runtime never imports it.
"""

from executorch.export._errors import ExportError, UnsupportedOperatorError
from executorch.export._export import export, supported_operators

__all__ = ["export", "supported_operators", "ExportError", "UnsupportedOperatorError"]
