# RUN: rm -f %t.png %t.npz
# RUN: %relax-mlir train --epochs 2 --no-progress --plot %t.png --save %t.npz | filecheck %s
# RUN: %relax-mlir train --epochs 3 --no-progress --resume %t.npz | filecheck %s --check-prefix=RESUME
"""`relax-mlir train`: what it prints per epoch, the plot, and resuming from the checkpoint of the first run."""

# CHECK: digits: 1438 training / 359 test examples, 1x8x8 images, 10 classes; mlp compiled for cpu in {{[0-9.]+}} s
# CHECK-NEXT: epoch 1/2: loss {{[0-9.]+}}  test accuracy {{[0-9.]+}}%  (22 steps, {{[0-9.]+}} ms/step)
# CHECK-NEXT: epoch 2/2: loss {{[0-9.]+}}  test accuracy {{[0-9.]+}}%  (22 steps, {{[0-9.]+}} ms/step)
# CHECK-NEXT: wrote {{.*}}.png
# CHECK-NEXT: final test accuracy: {{[0-9.]+}}%

# RESUME: mlp compiled for cpu
# RESUME-NEXT: resumed from {{.*}}.npz after epoch 2 (step 44)
# RESUME-NEXT: epoch 3/3: loss
# RESUME-NEXT: final test accuracy:
