"""Milliseconds per training step of the tutorial's MLP: compiled through MLIR, by hand in NumPy, in PyTorch.

    PYTHONPATH=. python benchmarks/bench_training.py [--reps 300]

Two sizes, batch 64, random data: the digits MLP 64-128-128-10 and the tutorial's 784-128-128-10. One step is
forward, summed softmax cross-entropy, backward and SGD (lr 0.01, coupled weight decay 0.01), the settings of
``relax-mlir train``. Rows:

* ``compiled (Trainer)``: ``Trainer.update_params(x, y)``, with its argument checks;
* ``compiled (vm call)``: the native ``update_params`` called directly;
* ``numpy``: the same step written by hand (its loss is checked against the compiled step's);
* ``torch``: PyTorch eager, when ``import torch`` works.

Each figure is the median of ``--reps`` steps after a warm-up. ``setup`` is SetupTrainer (the IR passes) and
``compile`` is MLIR to native code, from an empty compile cache.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SIZES = [(64, 128, 128, 10), (784, 128, 128, 10)]
BATCH, LR, WD = 64, 0.01, 0.01


def median_ms(step, reps: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def xavier(rng, sizes) -> list[np.ndarray]:
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        for shape in ((fan_in, fan_out), (fan_out,)):
            params.append((np.sqrt(6.0 / sum(shape)) * rng.uniform(-1, 1, shape)).astype(np.float32))
    return params


def compiled(sizes, params):
    """(trainer, setup seconds, compile seconds)."""
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.models import mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    clear_cache()
    t0 = time.perf_counter()
    backbone = mlp(BATCH, sizes)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(LR, weight_decay=WD),
                         [TensorStructInfo((BATCH, sizes[-1]), "float32"), TensorStructInfo((BATCH,), "int64")])
    trainer = Trainer(backbone, len(params), setup)
    t1 = time.perf_counter()
    trainer.build(target="cpu")
    t2 = time.perf_counter()
    trainer.load_params([p.copy() for p in params])
    return trainer, t1 - t0, t2 - t1


def numpy_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Forward, summed softmax cross-entropy, backward, SGD with coupled weight decay; updates ``params``."""
    acts, h = [x], x
    n_layers = len(params) // 2
    for i in range(n_layers):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n_layers - 1:
            h = np.maximum(h, 0)
        acts.append(h)
    shifted = h - h.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    log_p = shifted - log_z
    rows = np.arange(len(y))
    loss = -log_p[rows, y].sum()
    grad = np.exp(log_p)
    grad[rows, y] -= 1.0
    for i in reversed(range(n_layers)):
        w, b = params[2 * i], params[2 * i + 1]
        gw, gb = acts[i].T @ grad, grad.sum(axis=0)
        if i:
            grad = (grad @ w.T) * (acts[i] > 0)
        w -= LR * (WD * w + gw)
        b -= LR * (WD * b + gb)
    return float(loss)


def torch_step_fn(params: list[np.ndarray], x: np.ndarray, y: np.ndarray):
    try:
        import torch
    except ImportError:
        return None
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.SGD(ps, lr=LR, weight_decay=WD)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def step():
        h = tx
        for i in range(len(ps) // 2):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < len(ps) // 2 - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, ty, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def bench(sizes, reps: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (BATCH, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], BATCH).astype(np.int64)
    params = xavier(rng, sizes)
    trainer, setup_s, compile_s = compiled(sizes, params)
    mine = [p.copy() for p in params]
    ref_loss, got_loss = numpy_step(mine, x, y), float(trainer.update_params(x, y).numpy())
    if not np.isclose(ref_loss, got_loss, rtol=1e-4):
        raise AssertionError(f"{sizes}: NumPy step loss {ref_loss} != compiled step loss {got_loss}")
    fn = trainer.vm["update_params"]
    state = [trainer.params, trainer.states, trainer.optim_state]

    def vm_step():  # feed the results back, as Trainer does, so the figures are of a real training loop
        loss, state[0], state[1], state[2] = fn(x, *state[0], *state[1], y, *state[2])

    row = {"setup s": setup_s, "compile s": compile_s,
           "compiled (Trainer)": median_ms(lambda: trainer.update_params(x, y), reps),
           "compiled (vm call)": median_ms(vm_step, reps),
           "numpy": median_ms(lambda: numpy_step(mine, x, y), reps)}
    torch_step = torch_step_fn(params, x, y)
    row["torch"] = median_ms(torch_step, reps) if torch_step else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args()
    rows = {"-".join(map(str, s)): bench(s, args.reps) for s in SIZES}
    columns = ["compiled (Trainer)", "compiled (vm call)", "numpy", "torch", "setup s", "compile s"]
    print(f"ms per training step, batch {BATCH}, median of {args.reps}; setup and compile in seconds")
    print(f"{'MLP':<16}" + "".join(f"{c.replace('compiled ', ''):>12}" for c in columns))
    for name, row in rows.items():
        cells = ["n/a" if row[c] is None else f"{row[c]:.3f}" for c in columns]
        print(f"{name:<16}" + "".join(f"{c:>12}" for c in cells))
    print("(Trainer), (vm call): compiled through MLIR" + ("; torch: not installed" if
                                                         rows[next(iter(rows))]["torch"] is None else ""))


if __name__ == "__main__":
    main()
