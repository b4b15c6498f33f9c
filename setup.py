"""The one native module of relax-mlir: the common call's argument checks (relax_mlir/_callpath.c). Optional: when
it cannot be built (no C compiler or Python headers), the same checks run in Python (backend/callpath.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("relax_mlir._callpath", ["relax_mlir/_callpath.c"], optional=True,
                             extra_compile_args=["-O3", "-std=c11"])])
