# RUN: not %relax-mlir train --data %t.missing 2>&1 | filecheck %s --check-prefix=DATA
# RUN: not %relax-mlir train --epochs 0 --lr -1 --nesterov 2>&1 | filecheck %s --check-prefix=OPTIONS
# RUN: not %relax-mlir train --batch-size 5000 2>&1 | filecheck %s --check-prefix=BATCH
# RUN: not %relax-mlir train --plot %t.nodir/curves.png 2>&1 | filecheck %s --check-prefix=PLOT
"""Bad options of `relax-mlir train` end with status 1 and one line that says what is wrong, before compiling."""

# DATA: relax-mlir train: error: {{.*}}.missing: no such file or directory; expected a directory of IDX files or an .npz file
# DATA-NOT: Traceback

# OPTIONS: relax-mlir train: error: --epochs 0: must be at least 1; --lr -1.0: must be a positive number; --nesterov needs --optimizer momentum
# OPTIONS-NOT: Traceback

# BATCH: relax-mlir train: error: --batch-size 5000: the training set has only 1438 examples
# BATCH-NOT: Traceback

# PLOT: relax-mlir train: error: --plot {{.*}}curves.png: the directory {{.*}}.nodir does not exist
