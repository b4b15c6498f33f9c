"""MutateOpsForTraining / MutateOpsForInference, and the counter-based generator behind dropout's training form
(``relax.random.uniform``): its values are checked bit for bit against a pure-Python rendering of the documented
formula, and SplitMix64's published first output."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.ir.expr import Call, Constant
from relax_mlir.op.random import GAMMA, fold_in, uniform_values
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

from .test_decompose_ops import op_names, param_names

_T = TensorStructInfo

TWO_DROPOUTS = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((8, 3), "float32"), gamma: R.Tensor((3,), "float32"), beta: R.Tensor((3,), "float32"),
             mean: R.Tensor((3,), "float32"), var: R.Tensor((3,), "float32")):
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var)
            h = bn[0]
            d1 = R.nn.dropout(h, rate=0.5)
            h1 = d1[0]
            d2 = R.nn.dropout(h1, rate=0.2)
            gv = (d2[0], bn[1], bn[2])
            R.output(gv)
        return gv
'''


def _calls(mod, name, func="main") -> list[Call]:
    found = []
    for block in mod[func].blocks:
        for b in block.bindings:
            if isinstance(b.value, Call) and getattr(b.value.op, "name", None) == name:
                found.append(b.value)
    return found


def test_training_forms_and_the_key_parameter():
    mod = from_source(TWO_DROPOUTS)
    after = roundtrip(transform.MutateOpsForTraining()(mod))
    assert param_names(after) == ["x", "gamma", "beta", "mean", "var", "rng_key"]
    key = after["main"].params[-1]
    assert key.struct_info == _T((), "int64")
    assert [c.attrs["training"] for c in _calls(after, "relax.nn.batch_norm")] == [True]
    d1, d2 = _calls(after, "relax.nn.dropout")
    assert d1.args[1] is key  # site 0: the key itself; site 1: key + GAMMA (mod 2**64, as an int64)
    (derived,) = _calls(after, "relax.add")
    assert derived.args[0] is key and isinstance(derived.args[1], Constant)
    assert int(derived.args[1].data) == GAMMA - 2 ** 64
    # Applying it again changes nothing: the ops are in training form and the key parameter is there.
    again = transform.MutateOpsForTraining()(after)
    assert again.script() == after.script()


def test_an_existing_rng_key_parameter_is_used_and_must_be_an_int64_scalar():
    text = TWO_DROPOUTS.replace('var: R.Tensor((3,), "float32")):', 'var: R.Tensor((3,), "float32"), '
                                                                     'rng_key: R.Tensor((), "int64")):')
    after = transform.MutateOpsForTraining()(from_source(text))
    assert param_names(after).count("rng_key") == 1
    bad = text.replace('rng_key: R.Tensor((), "int64")', 'rng_key: R.Tensor((2,), "int64")')
    with pytest.raises(ValueError, match=r"MutateOpsForTraining: parameter 'rng_key' must be "
                                         r"R.Tensor\(\(\), \"int64\"\)"):
        transform.MutateOpsForTraining()(from_source(bad))


def test_functions_without_random_ops_keep_their_signature():
    mod = from_source(TWO_DROPOUTS.replace("d1 = R.nn.dropout(h, rate=0.5)\n            h1 = d1[0]\n"
                                           "            d2 = R.nn.dropout(h1, rate=0.2)\n            gv = (d2[0],",
                                           "gv = (h,"))
    after = transform.MutateOpsForTraining()(mod)
    assert param_names(after) == param_names(mod)


def test_a_called_function_cannot_silently_gain_a_parameter():
    text = '''
@I.ir_module
class M:
    @R.function
    def drop(x: R.Tensor((4,), "float32")):
        d = R.nn.dropout(x, rate=0.5)
        return d[0]

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = cls.drop(x)
        return y
'''
    with pytest.raises(ValueError, match=r"'drop' needs a parameter 'rng_key' for its random ops, but 'main' "
                                         r"call\(s\) it"):
        transform.MutateOpsForTraining()(from_source(text))
    after = transform.MutateOpsForTraining("main")(from_source(text))  # nothing random in main itself
    assert param_names(after, "drop") == ["x"]


def test_inference_forms_undo_training_forms():
    trained = transform.MutateOpsForTraining()(from_source(TWO_DROPOUTS))
    back = roundtrip(transform.MutateOpsForInference()(trained))
    assert [c.attrs["training"] for c in _calls(back, "relax.nn.batch_norm")] == [False]
    assert all(len(c.args) == 1 for c in _calls(back, "relax.nn.dropout"))


def test_training_semantics_end_to_end():
    mod = from_source(TWO_DROPOUTS)
    after = transform.DecomposeOpsForTraining()(mod)
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(8, 3)).astype(np.float32)] + [rng.uniform(0.5, 1.5, size=3).astype(np.float32)
                                                           for _ in range(4)]
    out, new_mean, new_var = interpret(after, "main", *args, fold_in(0, 3))
    want = interpret(transform.MutateOpsForTraining()(mod), "main", *args, fold_in(0, 3))
    np.testing.assert_allclose(out, want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new_mean, 0.9 * args[3] + 0.1 * args[0].mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(new_var, 0.9 * args[4] + 0.1 * args[0].var(axis=0), rtol=1e-5)
    assert op_names(after) >= {"relax.random.uniform", "relax.mean", "relax.variance"}


# -- relax.random.uniform ---------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def _mix64_py(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _uniform_py(key: int, i: int, p: int) -> float:
    bits = _mix64_py((_mix64_py(key & MASK64) + (i + 1) * GAMMA) & MASK64)
    return (bits >> (64 - p)) / 2.0 ** p


def test_splitmix64_first_output():
    # mix64(0) == 0, so key 0's first value is SplitMix64's first output for seed 0: 0xE220A8397B1DCDAF.
    got = uniform_values(np.array(0, np.int64), (1,), "float64")[0]
    assert got == (0xE220A8397B1DCDAF >> 11) * 2.0 ** -53


@pytest.mark.parametrize("dtype,p", [("float32", 24), ("float64", 53), ("float16", 11), ("bfloat16", 8)])
@pytest.mark.parametrize("key", [0, 1, -1, 2 ** 63 - 1, -2 ** 63, 123456789])
def test_uniform_is_the_documented_hash(dtype, p, key):
    got = uniform_values(np.array(key, np.int64), (3, 5), dtype)
    want = [_uniform_py(key, i, p) for i in range(15)]
    assert [float(v) for v in got.reshape(-1)] == want


def test_uniform_op_through_the_interpreter():
    key = Var("key", _T((), "int64"))
    bb = BlockBuilder()
    with bb.function("main", [key]):
        u = bb.emit(op.random.uniform(key, (400, 250)))
        bb.emit_func_output(u)
    mod = roundtrip(bb.get())
    u = interpret(mod, "main", np.array(2024, np.int64))
    assert u.dtype == np.float32 and u.shape == (400, 250)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.003 and abs(u.var() - 1 / 12) < 0.002  # std of the mean: 0.0006
    # A value depends on its flat index only, not on the shape it is drawn in.
    np.testing.assert_array_equal(u.reshape(-1)[:6], uniform_values(np.array(2024), (2, 3), "float32").ravel())
    # Neighbouring keys give unrelated streams (the key is hashed before use).
    assert abs(np.corrcoef(u.ravel(), interpret(mod, "main", np.array(2025, np.int64)).ravel())[0, 1]) < 0.01


def test_fold_in_derives_distinct_keys():
    keys = [int(fold_in(7, step)) for step in range(1000)]
    assert len(set(keys)) == 1000 and fold_in(7, 3).dtype == np.int64 and fold_in(7, 3).shape == ()
    assert int(fold_in(7, 3)) == int(fold_in(np.array(7), 3)) != int(fold_in(8, 3))
