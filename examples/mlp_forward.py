"""The tutorial's MLP, written in the text format, run forward on scikit-learn's digits.

This is the end-to-end path that exists today: the module is parsed from Python source (names kept),
printed, checked (print -> parse -> structurally equal, well formed), and evaluated by the NumPy
reference interpreter on a batch of digits with Xavier-initialised weights.

    python examples/mlp_forward.py
"""

from __future__ import annotations

import time

import numpy as np

from relax_mlir import interpret
from relax_mlir.ir import check_well_formed, structural_equal
from relax_mlir.script import from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R

batch_size = 64


@I.ir_module
class MLP:
    I.module_attrs({"param_num": 6, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((batch_size, 64), "float32"),
        w0: R.Tensor((64, 128), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((128, 128), "float32"),
        b1: R.Tensor((128,), "float32"),
        w2: R.Tensor((128, 10), "float32"),
        b2: R.Tensor((10,), "float32"),
    ) -> R.Tensor((batch_size, 10), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
            lv4 = R.add(lv3, b1)
            lv5 = R.nn.relu(lv4)
            lv6 = R.matmul(lv5, w2)
            out = R.add(lv6, b2)
            R.output(out)
        return out


def xavier_uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """sqrt(6 / sum(shape)) * U(-1, 1), as TVM's Trainer initialises parameters."""
    return (np.sqrt(6.0 / sum(shape)) * rng.uniform(-1, 1, size=shape)).astype(np.float32)


def main() -> None:
    from sklearn.datasets import load_digits

    MLP.show()
    again = from_source(MLP.script())
    assert structural_equal(again, MLP), "print -> parse changed the module"
    check_well_formed(MLP)
    print("round trip: print -> parse gives a structurally equal, well-formed module")

    digits = load_digits()
    x = (digits.data[:batch_size] / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    params = [p.struct_info.shape for p in MLP["backbone"].params[1:]]
    weights = [xavier_uniform(rng, tuple(s)) for s in params]
    start = time.perf_counter()
    logits = interpret(MLP, "backbone", x, *weights)
    elapsed = (time.perf_counter() - start) * 1e3
    print(f"interpreted backbone on {batch_size} digits: logits {logits.shape} {logits.dtype} in {elapsed:.2f} ms")
    accuracy = float(np.mean(logits.argmax(1) == digits.target[:batch_size]))
    print(f"untrained accuracy {accuracy:.2%} (chance is about 10%; training arrives with relax-mlir train)")


if __name__ == "__main__":
    main()
