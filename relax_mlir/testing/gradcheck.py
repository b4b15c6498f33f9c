"""Checking a gradient rule against central finite differences, as the registry test does for every op.

The scalar objective is a random-weighted sum of the op's output, ``sum(op(args) * w)`` (TVM's check), so the
output adjoint is ``w`` and the rule's vector-Jacobian product is compared with the numerical derivative of
the objective, all in float64.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir import BlockBuilder, Tuple, Var
from ..ir.dtype import is_float
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..op.registry import Op


def as_float64(sinfo: StructInfo) -> StructInfo:
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(as_float64(f) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo) and is_float(sinfo.dtype):
        return TensorStructInfo(sinfo.shape, "float64", sinfo.ndim)
    return sinfo


def vjp_module(op: Op, arg_sinfos: Sequence[StructInfo], attrs: dict):
    """A module whose ``vjp(args..., w)`` returns the rule's gradient for each argument (zeros where the
    rule gives none), built by emitting the rule's expressions with the BlockBuilder."""
    from ..op import zeros

    params = [Var(f"a{i}", s) for i, s in enumerate(arg_sinfos)]
    call = op(*params, **attrs)
    w = Var("w", call.struct_info)
    bb = BlockBuilder()
    with bb.function("vjp", params + [w]):
        y = bb.emit(call, "y")
        grads = op.gradient(y, bb.lookup_binding(y), w)
        if len(grads) != len(params):
            raise AssertionError(f"{op.name}: the rule returned {len(grads)} gradients for {len(params)} args")
        outs = []
        for p, g in zip(params, grads):
            if g is None:
                s = p.struct_info
                g = Tuple([zeros(f.shape, f.dtype) for f in s.fields]) if isinstance(s, TupleStructInfo) \
                    else zeros(s.shape, s.dtype)
            outs.append(bb.emit(g))
        bb.emit_func_output(Tuple(outs))
    return bb.get()


def _weighted_sum(value, w) -> float:
    if isinstance(value, (tuple, list)):
        return float(sum(_weighted_sum(v, x) for v, x in zip(value, w)))
    return float(np.sum(np.asarray(value, dtype=np.float64) * w))


def numerical_gradient(f, args: list, index: int, eps: float = 1e-6):
    """Central differences of the scalar ``f(args)`` with respect to ``args[index]`` (a tuple: each field)."""
    def one(arr, set_arg):
        grad = np.zeros_like(arr, dtype=np.float64)
        flat = arr.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = f(set_arg())
            flat[i] = old - eps
            down = f(set_arg())
            flat[i] = old
            grad.reshape(-1)[i] = (up - down) / (2 * eps)
        return grad

    target = args[index]
    if isinstance(target, tuple):
        copies = [np.array(t, dtype=np.float64) for t in target]
        return tuple(one(c, lambda: args[:index] + [tuple(copies)] + args[index + 1:]) for c in copies)
    copy = np.array(target, dtype=np.float64)
    return one(copy, lambda: args[:index] + [copy] + args[index + 1:])


def check_rule(op: Op, arg_sinfos, attrs: dict, arrays: list, rng: np.random.Generator,
               rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Assert that ``op``'s gradient rule matches finite differences at ``arrays`` (static float64 sinfos)."""
    from ..interpreter import interpret
    from ..op.registry import substitute_attrs

    mod = vjp_module(op, arg_sinfos, attrs)
    out_sinfo = mod["vjp"].params[-1].struct_info
    w = _random_like(out_sinfo, rng)
    analytic = interpret(mod, "vjp", *arrays, w)
    ref_attrs = substitute_attrs(op.complete_attrs(attrs), {})

    def objective(args):
        return _weighted_sum(op.reference(*args, **ref_attrs), w)

    for i, s in enumerate(arg_sinfos):
        if not _differentiable(s) or op.inputs[min(i, len(op.inputs) - 1)] in op.no_grad_inputs:
            continue
        numeric = numerical_gradient(objective, list(arrays), i)
        got = analytic[i]
        for n, a in zip(numeric if isinstance(numeric, tuple) else (numeric,),
                        got if isinstance(got, tuple) else (got,)):
            np.testing.assert_allclose(a, n, rtol=rtol, atol=atol,
                                       err_msg=f"{op.name}: gradient of argument {i} ({op.inputs[min(i, len(op.inputs) - 1)]})")


def _differentiable(s: StructInfo) -> bool:
    if isinstance(s, TupleStructInfo):
        return all(_differentiable(f) for f in s.fields)
    return isinstance(s, TensorStructInfo) and is_float(s.dtype)


def _random_like(sinfo: StructInfo, rng):
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random_like(f, rng) for f in sinfo.fields)
    if not is_float(sinfo.dtype):
        from ..ir.dtype import to_numpy

        return np.zeros(tuple(sinfo.shape), dtype=to_numpy(sinfo.dtype))  # integer outputs carry no gradient
    from ..ir.dtype import to_numpy

    return rng.uniform(-1, 1, size=tuple(sinfo.shape)).astype(to_numpy(sinfo.dtype))
