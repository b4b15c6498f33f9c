# RUN: rm -f %t.npz
# RUN: %relax-mlir train --epochs 2 --no-progress --hidden 16 --lr-schedule cosine --warmup-steps 5 --save %t.npz | filecheck %s
# RUN: not %relax-mlir train --epochs 3 --no-progress --hidden 16 --lr-schedule cosine --warmup-steps 5 --resume %t.npz 2>&1 | filecheck %s --check-prefix=EPOCHS
# RUN: %relax-mlir train --epochs 1 --no-progress --hidden 16 --lr-schedule multistep --lr-milestones 10 20 --lr-gamma 0.5 | filecheck %s --check-prefix=MULTISTEP
# RUN: not %relax-mlir train --no-progress --lr-schedule step --lr-milestones 10 2>&1 | filecheck %s --check-prefix=OTHER
"""`relax-mlir train --lr-schedule`: the header line says the schedule (only when there is one: train.py checks the
line of a constant rate), the epochs print as without one, a cosine's checkpoint is not resumed into a longer run,
and an option of another schedule is refused in one line."""

# CHECK: digits: 1438 training / 359 test examples, 1x8x8 images, 10 classes; mlp compiled for cpu in {{[0-9.]+}} s; lr 0.01, warm-up from 0.01x over 5 steps, then cosine to 0.0 over 39 steps
# CHECK-NEXT: epoch 1/2: loss {{[0-9.]+}}  test accuracy {{[0-9.]+}}%  (22 steps, {{[0-9.]+}} ms/step)
# CHECK-NEXT: epoch 2/2: loss {{[0-9.]+}}  test accuracy {{[0-9.]+}}%  (22 steps, {{[0-9.]+}} ms/step)
# CHECK-NEXT: final test accuracy: {{[0-9.]+}}%

# EPOCHS: relax-mlir train: error: --resume {{.*}}.npz: the run would not continue the checkpoint's: epochs: 2 in the checkpoint, 3 now (a cosine or linear schedule decays over the whole run: another --epochs is another schedule)
# EPOCHS-NOT: Traceback

# MULTISTEP: mlp compiled for cpu in {{[0-9.]+}} s; lr 0.01, x0.5 at steps 10, 20
# MULTISTEP-NEXT: epoch 1/1: loss

# OTHER: relax-mlir train: error: --lr-milestones needs --lr-schedule multistep; --lr-schedule step needs --lr-step-size
# OTHER-NOT: Traceback
