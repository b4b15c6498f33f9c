"""The one native module of relax-mlir: the common call's argument checks (relax_mlir/_callpath.c), built against
NumPy's C headers. Optional: when it cannot be built (no C compiler, Python or NumPy headers), the same checks run
in Python (backend/callpath.py)."""

from setuptools import Extension, setup


def _numpy_include() -> list[str]:
    try:
        import numpy
    except ImportError:  # (the build then fails and is skipped: the extension is optional)
        return []
    return [numpy.get_include()]


setup(ext_modules=[Extension("relax_mlir._callpath", ["relax_mlir/_callpath.c"], optional=True,
                             include_dirs=_numpy_include(), extra_compile_args=["-O3", "-std=c11"])])
