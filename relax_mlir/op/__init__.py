"""Relax ops: ``relax_mlir.op.add(a, b)``, ``relax_mlir.op.nn.relu(x)``; one record per op in its family file.

``list_ops()`` returns every record; ``get_op("relax.add")`` one of them. The nested namespaces
``op.nn``, ``op.grad``, ``op.random`` and ``op.image`` are the family modules (``nn`` and ``grad`` packages)
themselves.
``substitute_attrs(call.attrs, sizes)`` binds the size variables of a call's attributes before its reference runs.
"""

from . import (binary, create, diagonal, fast_math, grid, indexing, layout, linalg, logical, manipulate, nn, random,
               reduce, scan, scatter, scatter_nd, sort, split, summation, ternary, tiling, unary)
from . import grad  # after the families: its backward ops build on theirs
from . import image  # relax.image.*, a nested namespace as nn (R.image.resize2d)
from .registry import (NOT_DIFFERENTIABLE, REQUIRED, SECOND_ORDER_UNSUPPORTED, BadSample, Op, Sample, get_op,
                       list_ops, register, substitute_attrs)

# Re-export the top-level ops (relax.add, relax.sum, ...) by their short names.
for _family in (unary, fast_math, binary, ternary, logical, create, diagonal, reduce, scan, manipulate, split, grid,
                indexing, linalg, random, summation, tiling, scatter, scatter_nd, sort, layout):
    for _name, _value in vars(_family).items():
        if isinstance(_value, Op) and not _name.startswith("_"):
            globals()[_name] = _value
del _family, _name, _value
