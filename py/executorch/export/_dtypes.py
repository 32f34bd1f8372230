"""Element types of the program format: PyTorch's ScalarType codes and their sizes in bytes."""

from __future__ import annotations

from typing import Iterable

UINT8, INT8, INT16, INT32, INT64, FLOAT16, FLOAT32, FLOAT64, BOOL, BFLOAT16 = 0, 1, 2, 3, 4, 5, 6, 7, 11, 15

ELEMENT_SIZES = {UINT8: 1, INT8: 1, INT16: 2, INT32: 4, INT64: 8, FLOAT16: 2, FLOAT32: 4, FLOAT64: 8, BOOL: 1,
                 BFLOAT16: 2}


def nbytes(dtype: int, sizes: Iterable[int]) -> int:
    """Bytes of a contiguous tensor of element type `dtype` and shape `sizes`."""
    size = ELEMENT_SIZES[dtype]
    for s in sizes:
        size *= s
    return size
