"""Memory planning: places tensors with known lifetimes in one buffer, reusing freed space."""

from __future__ import annotations

from dataclasses import dataclass

ALIGNMENT = 64


@dataclass
class Allocation:
    size: int
    first_use: int  # instruction index that defines it (-1: before the first)
    last_use: int  # last instruction index that reads it (inclusive)
    offset: int = -1


def plan(allocations: list[Allocation]) -> int:
    """Assigns offsets so that tensors alive at the same time never overlap; returns the size.

    Greedy by size: the largest tensors are placed first, each at the lowest aligned offset that
    clears every already-placed tensor whose lifetime overlaps its own.
    """
    placed: list[Allocation] = []
    total = 0
    for a in sorted(allocations, key=lambda x: (-x.size, x.first_use)):
        size = (a.size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        busy = sorted(
            (p.offset, p.offset + (p.size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)
            for p in placed
            if not (p.last_use < a.first_use or a.last_use < p.first_use)
        )
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        a.offset = offset
        total = max(total, offset + size)
        placed.append(a)
    return total
