"""ConvertLayout: the CNN moved to NHWC keeps its values (interpreted and compiled) and trains the same; the layout
is carried through batch_norm, relu and pooling with one permutation back before the flatten; random chains of
layout-aware and layout-blind ops keep their values for every choice of layouts; bad options are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import check_well_formed
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import cnn
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

NHWC = transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})


def _ops(func) -> list[str]:
    return [b.value.op.name for block in func.body.blocks for b in block.bindings
            if hasattr(getattr(b.value, "op", None), "name")]


def _cnn_args(mod, rng):
    out = []
    for p in mod["backbone"].params:
        shape = tuple(int(d) for d in p.struct_info.shape)
        out.append((rng.standard_normal(shape) * 0.5 + (1.0 if p.name_hint.endswith("var") else 0.0))
                   .astype(np.float32))
    return out


def test_the_cnn_in_nhwc_keeps_its_values_with_one_permutation_back():
    mod = cnn(4, (1, 8, 8), (4, 8), 10)
    converted = NHWC(mod)
    roundtrip(converted)
    ops = _ops(converted["backbone"])
    convs = [b.value for block in converted["backbone"].body.blocks for b in block.bindings
             if getattr(b.value, "op", None) is not None and getattr(b.value.op, "name", "") == "relax.nn.conv2d"]
    assert all(c.attrs["data_layout"] == "NHWC" and c.attrs["kernel_layout"] == "OHWI" for c in convs)
    pools = [b.value for block in converted["backbone"].body.blocks for b in block.bindings
             if getattr(getattr(b.value, "op", None), "name", "") == "relax.nn.max_pool2d"]
    assert all(p.attrs["layout"] == "NHWC" for p in pools) and len(pools) == 2
    # x in, two weights, and one permutation back before the flatten: the stages stay NHWC in between
    assert ops.count("relax.permute_dims") == 4, converted.script()
    rng = np.random.default_rng(0)
    args = _cnn_args(mod, rng)
    want = relax_mlir.interpret(mod, "backbone", *args)
    got = relax_mlir.interpret(converted, "backbone", *args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # the permutations move data, the NCHW reference computes alike
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(converted))["backbone"](*args)
    for g, w in zip(compiled, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)  # float32 sums in another order than NumPy's


def _train(backbone, steps=3):
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((8, 10), "float32"), TensorStructInfo((8,), "int64")])
    trainer = Trainer(setup(backbone)).build()
    trainer.xavier_uniform_init_params(seed=7)
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 10, 8).astype(np.int64)
        losses.append(float(np.asarray(trainer.update_params(x, y))))
    return losses


def test_the_nhwc_cnn_trains_as_the_nchw_one():
    want = _train(cnn(8, (1, 8, 8), (4, 8), 10))
    got = _train(NHWC(cnn(8, (1, 8, 8), (4, 8), 10)))
    # the gradients go through the NCHW convolution between permutations: float32 rounding only
    np.testing.assert_allclose(got, want, rtol=1e-4)


STAGES = {
    "conv": "R.nn.conv2d({x}, w{i}, padding=1)",
    "relu": "R.nn.relu({x})",
    "scale": "R.multiply({x}, R.const(0.5, \"float64\"))",
    "bias4": "R.add({x}, b4)",
    "bias3": "R.add({x}, b3)",
    "maxpool": "R.nn.max_pool2d({x}, pool_size=2, strides=1, padding=(1, 1, 0, 0))",
    "avgpool": "R.nn.avg_pool2d({x}, pool_size=3, padding=1)",
    "sum": "R.sum({x}, axis=[1], keepdims=True)",
    "tanh": "R.tanh({x})",
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(STAGES)), min_size=1, max_size=6),
       st.sampled_from(["NHWC", "NCHW"]), st.sampled_from(["OIHW", "OHWI", "HWIO"]),
       st.sampled_from([None, "NHWC", "NCHW"]), st.booleans(), st.integers(0, 2**31))
def test_random_chains_keep_their_values(stages, data_layout, kernel_layout, pool_layout, bn, seed):
    lines, x, convs = [], "x", 0
    for i, stage in enumerate(stages):
        if stage == "sum":
            continue  # a channel sum breaks the 4-channel shapes of later stages: put it last only
        lines.append(f"            t{i} = " + STAGES[stage].format(x=x, i=convs))
        convs += stage == "conv"
        x = f"t{i}"
    if bn:
        lines += [f"            bn = R.nn.batch_norm({x}, g, g, g, v, axis=1)", "            tb = bn[0]"]
        x = "tb"
    if "sum" in stages:
        lines.append(f"            ts = R.sum({x}, axis=[1], keepdims=True)")
        x = "ts"
    lines.append(f"            y = R.reshape({x}, (2, -1))")
    weights = "".join(f", w{k}: R.Tensor((4, 4, 3, 3), \"float64\")" for k in range(convs))
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 5, 5), "float64"), b4: R.Tensor((1, 4, 1, 1), "float64"),
             b3: R.Tensor((4, 1, 1), "float64"), g: R.Tensor((4,), "float64"), v: R.Tensor((4,), "float64"){weights}):
        with R.dataflow():
{chr(10).join(lines)}
            R.output(y)
        return y
"""
    mod = from_source(text)
    desired = {"relax.nn.conv2d": [data_layout, kernel_layout]}
    if pool_layout:
        desired["relax.nn.max_pool2d"] = [pool_layout]
    converted = transform.ConvertLayout(desired)(mod)
    check_well_formed(converted)
    roundtrip(converted)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((1, 4, 1, 1)), rng.standard_normal((4, 1, 1)),
            rng.standard_normal(4), rng.uniform(0.5, 2, 4)] + [rng.standard_normal((4, 4, 3, 3)) * 0.3
                                                              for _ in range(convs)]
    np.testing.assert_allclose(relax_mlir.interpret(converted, "main", *args), relax_mlir.interpret(mod, "main", *args),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("desired, message", [
    ({}, "desired_layouts must map op names"),
    ({"relax.nn.conv2d": ["NHWC"]}, r"takes \[data layout, kernel layout\]"),
    ({"relax.nn.conv2d": ["NHWC", "IOHW"]}, "the kernel layout one of OIHW, OHWI, HWIO"),
    ({"relax.nn.max_pool2d": ["NCWH"]}, r"takes \[layout\], one of NCHW, NHWC"),
    ({"relax.nn.dense": ["NHWC"]}, "no layout conversion for 'relax.nn.dense'"),
])
def test_bad_desired_layouts_are_refused(desired, message):
    with pytest.raises(ValueError, match=message):
        transform.ConvertLayout(desired)
