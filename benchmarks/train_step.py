"""Milliseconds per training step: relax-mlir next to NumPy by hand, PyTorch eager and JAX jit, alternated.

    python benchmarks/train_step.py [--rounds 7] [--steps 20] [--warmup 3] [--threads 2] [--only mlp-wide,cnn-28]
                                    [--optimizer sgd|adam]

Five workloads (summed cross-entropy, SGD lr 0.01 with weight decay 0.01, random data, the same initial
weights everywhere; ``--optimizer adam``: Adam lr 0.001, betas (0.9, 0.999), eps 1e-8, the same coupled weight
decay, in every framework; the performance issue's targets are for SGD):

    mlp-digits   64 -> 128 -> 128 -> 10, batch 64 (the tutorial's MLP on digits)
    mlp-mnist    784 -> 128 -> 128 -> 10, batch 64 (the tutorial's size)
    mlp-wide     1024 -> 1024 -> 1024 -> 10, batch 256
    cnn-8        relax_mlir.models.cnn, channels 8, 16, on 1x8x8, batch 64
    cnn-28       the same CNN on 1x28x28, batch 64

Every framework runs in a process of its own (so no two thread pools share the cores), started once per
workload; the parent then alternates rounds of ``--steps`` timed steps between them (each round after a pause
of 0.3 s, which lets the previous worker's spinning threads sleep, and ``--warmup`` untimed steps that find the
caches cold after it: a training loop runs its steps back to back) and reports, per framework, the
median, min and max of the per-step times over all rounds, GFLOP/s (3x the forward pass's multiply-adds, x2),
the first two steps' losses (checked against relax-mlir's: the same work, and the same update, is done) and the
ratios the performance issue targets. A framework that is not installed is skipped with a message.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

LR, WD = 0.01, 0.01
ADAM_LR, BETAS, EPS = 0.001, (0.9, 0.999), 1e-8
MOMENTUM = 0.9  # relax-mlir's step only (benchmarks/ab_step.py --optimizer momentum)
OPTIMIZER = "sgd"  # set by --optimizer (the workers get it on their command line)
WORKLOADS = {
    "mlp-digits": ("mlp", 64, (64, 128, 128, 10)),
    "mlp-mnist": ("mlp", 64, (784, 128, 128, 10)),
    "mlp-wide": ("mlp", 256, (1024, 1024, 1024, 10)),
    "cnn-8": ("cnn", 64, (1, 8, 8)),
    "cnn-28": ("cnn", 64, (1, 28, 28)),
}
CHANNELS, CLASSES = (8, 16), 10
FRAMEWORKS = ("relax-mlir", "numpy", "torch", "jax")
#: (workload, numerator, denominators, target): numerator's step <= target x the best denominator's.
TARGETS = [("mlp-digits", "relax-mlir", ("jax",), 0.5), ("mlp-mnist", "relax-mlir", ("jax",), 0.5),
           ("mlp-wide", "relax-mlir", ("torch", "jax"), 0.95), ("cnn-8", "relax-mlir", ("torch",), 0.5),
           ("cnn-28", "relax-mlir", ("torch",), 0.5)]


# --- the workloads' data and weights (identical in every worker) -------------------------------------------------
def make_data(name: str) -> dict:
    kind, batch, shape = WORKLOADS[name]
    rng = np.random.default_rng(0)
    if kind == "mlp":
        x = rng.uniform(0, 1, (batch, shape[0])).astype(np.float32)
        params = []
        for fan_in, fan_out in zip(shape[:-1], shape[1:]):
            bound = np.sqrt(6.0 / (fan_in + fan_out))
            params += [rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
                       rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)]
        return {"x": x, "y": rng.integers(0, shape[-1], batch).astype(np.int64), "params": params, "states": []}
    c, h, w = shape
    x = rng.standard_normal((batch, c, h, w)).astype(np.float32)
    params, states = [], []
    for out_c in CHANNELS:
        bound = np.sqrt(6.0 / (9 * (c + out_c)))
        params += [rng.uniform(-bound, bound, (out_c, c, 3, 3)).astype(np.float32),
                   np.ones(out_c, np.float32), np.zeros(out_c, np.float32)]
        states += [np.zeros(out_c, np.float32), np.ones(out_c, np.float32)]
        c, h, w = out_c, h // 2, w // 2
    bound = np.sqrt(6.0 / (c * h * w + CLASSES))
    params += [rng.uniform(-bound, bound, (c * h * w, CLASSES)).astype(np.float32), np.zeros(CLASSES, np.float32)]
    return {"x": x, "y": rng.integers(0, CLASSES, batch).astype(np.int64), "params": params, "states": states}


def step_flops(name: str) -> float:
    """3x the forward pass's flops (forward, and two products per layer backward; the first layer's input
    gradient is counted although no framework computes it)."""
    kind, batch, shape = WORKLOADS[name]
    if kind == "mlp":
        return 3.0 * sum(2 * batch * a * b for a, b in zip(shape[:-1], shape[1:]))
    c, h, w = shape
    total = 0
    for out_c in CHANNELS:
        total += 2 * batch * out_c * h * w * c * 9
        c, h, w = out_c, h // 2, w // 2
    return 3.0 * (total + 2 * batch * c * h * w * CLASSES)


# --- one framework's step -----------------------------------------------------------------------------------------
def relax_step(name: str, data: dict, threads: int):
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SGD, Adam, CrossEntropyLoss, MomentumSGD, SetupTrainer, Trainer

    kind, batch, shape = WORKLOADS[name]
    backbone = mlp(batch, shape) if kind == "mlp" else cnn(batch, shape, CHANNELS, CLASSES)
    opt = {"sgd": lambda: SGD(LR, weight_decay=WD), "adam": lambda: Adam(ADAM_LR, BETAS, EPS, weight_decay=WD),
           "momentum": lambda: MomentumSGD(LR, MOMENTUM, weight_decay=WD)}[OPTIMIZER]()  # (momentum: ab_step.py)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), opt,
                         [TensorStructInfo((batch, CLASSES), "float32"), TensorStructInfo((batch,), "int64")])
    trainer = Trainer(backbone, len(data["params"]), setup)
    os.environ["RELAX_MLIR_NUM_THREADS"] = str(threads)
    trainer.build(target="cpu")
    trainer.load_params([p.copy() for p in data["params"]])
    if data["states"]:
        trainer.load_states([s.copy() for s in data["states"]])
    x, y = data["x"], data["y"]
    return lambda: trainer.update_params(x, y)


def numpy_step(name: str, data: dict, threads: int):
    if WORKLOADS[name][0] != "mlp":
        return None
    params, x, y = [p.copy() for p in data["params"]], data["x"], data["y"]
    rows, n_layers = np.arange(len(y)), len(params) // 2
    moments = [[np.zeros_like(p) for p in params] for _ in range(2)]
    t = [0]

    def update(i: int, p: np.ndarray, g: np.ndarray) -> None:
        g = g + WD * p
        if OPTIMIZER == "sgd":
            p -= LR * g
            return
        m, v = moments[0][i], moments[1][i]
        m *= BETAS[0]
        m += (1 - BETAS[0]) * g
        v *= BETAS[1]
        v += (1 - BETAS[1]) * (g * g)
        m_hat, v_hat = m / (1 - BETAS[0] ** t[0]), v / (1 - BETAS[1] ** t[0])
        p -= ADAM_LR * (m_hat / (np.sqrt(v_hat) + EPS))

    def step() -> float:
        acts, h = [x], x
        for i in range(n_layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n_layers - 1:
                h = np.maximum(h, 0)
            acts.append(h)
        shifted = h - h.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss = -log_p[rows, y].sum()
        grad = np.exp(log_p)
        grad[rows, y] -= 1.0
        t[0] += 1
        for i in reversed(range(n_layers)):
            w, b = params[2 * i], params[2 * i + 1]
            gw, gb = acts[i].T @ grad, grad.sum(axis=0)
            if i:
                grad = (grad @ w.T) * (acts[i] > 0)
            update(2 * i, w, gw)
            update(2 * i + 1, b, gb)
        return float(loss)
    return step


def torch_step(name: str, data: dict, threads: int):
    import torch

    torch.set_num_threads(threads)
    kind, batch, shape = WORKLOADS[name]
    ps = [torch.tensor(p) for p in data["params"]]
    if kind == "mlp":
        layers = []
        for i in range(len(ps) // 2):
            lin = torch.nn.Linear(*ps[2 * i].shape)
            lin.weight.data, lin.bias.data = ps[2 * i].T.contiguous(), ps[2 * i + 1]
            layers += [lin, torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1])
    else:
        layers, it = [], iter(ps)
        for i, out_c in enumerate(CHANNELS):
            weight, gamma, beta = next(it), next(it), next(it)
            conv = torch.nn.Conv2d(weight.shape[1], out_c, 3, padding=1, bias=False)
            conv.weight.data = weight
            bn = torch.nn.BatchNorm2d(out_c)
            bn.weight.data, bn.bias.data = gamma, beta
            layers += [conv, bn, torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        dense_w, dense_b = next(it), next(it)
        lin = torch.nn.Linear(*dense_w.shape)
        lin.weight.data, lin.bias.data = dense_w.T.contiguous(), dense_b
        model = torch.nn.Sequential(*layers, torch.nn.Flatten(), lin)
    model.train()
    opt = (torch.optim.SGD(model.parameters(), lr=LR, weight_decay=WD) if OPTIMIZER == "sgd" else
           torch.optim.Adam(model.parameters(), lr=ADAM_LR, betas=BETAS, eps=EPS, weight_decay=WD))
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"])

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def _jax_loss(params, x, y):
    """The MLP's summed cross-entropy in JAX."""
    import jax
    import jax.numpy as jnp

    h = x
    for i in range(len(params) // 2):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < len(params) // 2 - 1:
            h = jax.nn.relu(h)
    return -jnp.take_along_axis(jax.nn.log_softmax(h), y[:, None], axis=1).sum()


def jax_update():
    """The MLP step in JAX, not jitted: ``update(params, x, y) -> (loss, new params)`` (also compile_time.py's)."""
    import jax

    def update(params, x, y):
        loss, grads = jax.value_and_grad(_jax_loss)(params, x, y)
        return loss, [p - LR * (g + WD * p) for p, g in zip(params, grads)]
    return update


def jax_adam_update():
    """The MLP step with Adam in JAX, not jitted: ``update((params, m, v, t), x, y) -> (loss, new state)``."""
    import jax
    import jax.numpy as jnp

    def update(state, x, y):
        params, ms, vs, t = state
        loss, grads = jax.value_and_grad(_jax_loss)(params, x, y)
        t = t + 1
        new: tuple[list, list, list] = ([], [], [])
        for p, g, m, v in zip(params, grads, ms, vs):
            g = g + WD * p
            m = BETAS[0] * m + (1 - BETAS[0]) * g
            v = BETAS[1] * v + (1 - BETAS[1]) * (g * g)
            m_hat, v_hat = m / (1 - BETAS[0] ** t), v / (1 - BETAS[1] ** t)
            for out, a in zip(new, (p - ADAM_LR * (m_hat / (jnp.sqrt(v_hat) + EPS)), m, v)):
                out.append(a)
        return loss, (*new, t)
    return update


def jax_step(name: str, data: dict, threads: int):
    if WORKLOADS[name][0] != "mlp":
        return None
    import jax
    import jax.numpy as jnp

    update = jax.jit(jax_update() if OPTIMIZER == "sgd" else jax_adam_update(), donate_argnums=(0,))
    params = [jnp.asarray(p) for p in data["params"]]
    state = {"s": params if OPTIMIZER == "sgd" else (params, [jnp.zeros_like(p) for p in params],
                                                     [jnp.zeros_like(p) for p in params], jnp.float32(0))}
    x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])

    def step():
        loss, state["s"] = update(state["s"], x, y)
        return loss.block_until_ready()
    return step


STEPS = {"relax-mlir": relax_step, "numpy": numpy_step, "torch": torch_step, "jax": jax_step}


def worker(framework: str, name: str, threads: int) -> None:
    """Build the step, report the first loss and the build time, then run ``run N`` requests from stdin."""
    data = make_data(name)
    t0 = time.perf_counter()
    try:
        step = STEPS[framework](name, data, threads)
    except ImportError as err:
        print(json.dumps({"skip": f"{framework} not installed ({err})"}), flush=True)
        return
    if step is None:
        print(json.dumps({"skip": f"{framework}: no {name} step written"}), flush=True)
        return
    loss = float(np.asarray(step()))
    ready = time.perf_counter() - t0
    second = float(np.asarray(step()))  # after one update: the optimizers agree too
    print(json.dumps({"ready": ready, "loss": loss, "second": second}), flush=True)
    for line in sys.stdin:
        if not line.startswith("run"):
            break
        words = line.split()
        for _ in range(int(words[2]) if len(words) > 2 else 0):
            step()  # untimed: the round's first steps find caches and predictors cold after the pause
        times = []
        for _ in range(int(words[1])):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times}), flush=True)


# --- the parent: alternate the workers, print the table ------------------------------------------------------------
def _start(framework: str, name: str, threads: int):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), XLA_FLAGS=os.environ.get("XLA_FLAGS", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--worker", framework, name, "--threads", str(threads),
                             "--optimizer", OPTIMIZER],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    reply = json.loads(proc.stdout.readline() or '{"skip": "worker died"}')
    if "skip" in reply:
        proc.wait()
        return None, reply
    return proc, reply


def measure(name: str, args) -> dict:
    workers, results = {}, {}
    for fw in FRAMEWORKS:
        proc, reply = _start(fw, name, args.threads)
        if proc is None:
            print(f"  {name}: {fw} skipped: {reply['skip']}")
            continue
        workers[fw] = proc
        results[fw] = {"build s": reply["ready"], "loss": reply["loss"], "second": reply["second"], "times": []}
    for _ in range(args.rounds):
        for fw, proc in workers.items():
            time.sleep(0.3)  # let the previous worker's spinning threads go to sleep
            proc.stdin.write(f"run {args.steps} {args.warmup}\n")
            proc.stdin.flush()
            results[fw]["times"] += json.loads(proc.stdout.readline())["times"]
    for proc in workers.values():
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait()
    return results


def report(name: str, results: dict) -> dict:
    flops = step_flops(name)
    medians = {}
    base = results.get("relax-mlir")
    print(f"\n{name}: {flops / 1e9:.3f} GFLOP a step")
    print(f"  {'framework':<11}{'median ms':>11}{'min':>9}{'max':>9}{'GFLOP/s':>9}{'build s':>9}  first, second loss")
    for fw, r in results.items():
        ms = [1e3 * t for t in r["times"]]
        med = statistics.median(ms)
        medians[fw] = med
        medians[fw, "min"] = min(ms)
        agree = "" if base is None or np.allclose([r["loss"], r["second"]], [base["loss"], base["second"]],
                                                  rtol=2e-3) else "  (differs!)"
        print(f"  {fw:<11}{med:>11.3f}{min(ms):>9.3f}{max(ms):>9.3f}{flops / med / 1e6:>9.1f}"
              f"{r['build s']:>9.2f}  {r['loss']:.4f}, {r['second']:.4f}{agree}")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed steps at the start of every round, in every framework (0: none)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global OPTIMIZER
    OPTIMIZER = args.optimizer
    if args.worker:
        worker(args.worker[0], args.worker[1], args.threads)
        return
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    from relax_mlir.backend.host import host_cpu

    print(f"threads {args.threads}; host {host_cpu()}; {args.rounds} rounds x {args.steps} steps "
          f"(after {args.warmup} untimed), alternated; "
          f"optimizer {args.optimizer}")
    medians = {name: report(name, measure(name, args)) for name in names}
    print("\ntargets (relax-mlir's median step / the best of the others'"
          f"{'' if args.optimizer == 'sgd' else '; the targets are set for SGD'}):")
    for name, num, dens, target in TARGETS:
        row = medians.get(name, {})
        present = [row[d] for d in dens if d in row]
        if num not in row or not present:
            print(f"  {name:<11} n/a (missing: {', '.join(d for d in (num, *dens) if d not in row)})")
            continue
        ratio = row[num] / min(present)
        # the ratio of the fastest steps too: on a shared machine the other tenants inflate medians unevenly
        fastest = row[num, "min"] / min(row[d, "min"] for d in dens if d in row)
        print(f"  {name:<11} {ratio:6.2f}x {'/'.join(dens):<10} target <= {target:.2f}  "
              f"{'met' if ratio <= target else 'NOT met':<8} (fastest steps: {fastest:.2f}x)")


if __name__ == "__main__":
    main()
