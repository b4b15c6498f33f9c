"""``relax_mlir.transform`` imports a pass's file on first use (a warm ``relax-mlir train`` needs a few of them), and
whatever lists the passes still sees every one: ``PASSES`` (through ``transform`` or ``pass_infra``),
``list_passes()``, ``parse_pipeline``, ``dir``, ``import *``, ``relax-mlir passes``.

Each check runs in a fresh interpreter: in this one, other tests have long since imported every pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from relax_mlir import transform

TRANSFORM = Path(__file__).resolve().parents[1].parent / "relax_mlir" / "transform"


def run_fresh(code: str):
    """The JSON ``code`` prints last, run by a new interpreter."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def every_pass_by_importing_each_file() -> dict[str, str]:
    """The oracle: pass name -> module, after importing every ``.py`` file of ``relax_mlir/transform`` by hand."""
    return run_fresh(f"""
        import importlib, json, pathlib
        from relax_mlir.transform.pass_infra import PASSES
        for path in sorted(pathlib.Path({str(TRANSFORM)!r}).glob("*.py")):
            if path.stem != "__init__":
                importlib.import_module("relax_mlir.transform." + path.stem)
        print(json.dumps({{name: cls.__module__ for name, cls in PASSES.items()}}))
    """)


def test_importing_the_package_or_the_train_path_imports_no_pass_it_does_not_use():
    loaded = run_fresh("""
        import json, sys
        import relax_mlir, relax_mlir.cli
        import relax_mlir.training.config, relax_mlir.training.plot, relax_mlir.training.run  # cmd_train's
        print(json.dumps(sorted(sys.modules)))
    """)
    passes = [m for m in loaded if m.startswith("relax_mlir.transform.") and m.rpartition(".")[2] in transform._FILES]
    assert "relax_mlir.transform.fuse_ops" not in passes and "relax_mlir.dpl" not in loaded
    assert len(passes) <= 3, passes  # append_loss (relax_mlir.training's AppendLoss) and what it imports
    assert "relax_mlir.interpreter" not in loaded and "relax_mlir.frontend" not in loaded


def test_the_interpreters_names_are_served_from_the_package():
    names = run_fresh("""
        import json, relax_mlir
        from relax_mlir import interpret
        from relax_mlir.interpreter import get_global_func, register_func
        print(json.dumps([interpret is relax_mlir.interpreter.interpret, relax_mlir.get_global_func is get_global_func,
                          relax_mlir.register_func is register_func]))
    """)
    assert names == [True, True, True]


def test_every_way_of_listing_the_passes_sees_every_pass_from_a_fresh_start():
    every = every_pass_by_importing_each_file()
    assert len(every) >= 45
    for listing in ["sorted(transform.PASSES)",
                    "sorted(relax_mlir.transform.pass_infra.PASSES)",
                    "sorted(transform.PASSES.keys())",
                    "[len(transform.PASSES)] and sorted(dict(transform.PASSES))",
                    "[c.name for c in transform.list_passes()]",
                    "sorted(n for n in dir(transform) if n in every)",
                    "sorted(n for n in ns if n in every)",
                    "[line.split()[0] for line in out.getvalue().splitlines()]"]:
        names = run_fresh(f"""
            import contextlib, io, json
            import relax_mlir
            from relax_mlir import transform
            every = {sorted(every)!r}
            ns = {{}}
            if "ns" in {listing!r}:
                exec("from relax_mlir.transform import *", ns)
            out = io.StringIO()
            if "out" in {listing!r}:
                from relax_mlir.cli import main
                with contextlib.redirect_stdout(out):
                    main(["passes"])
            print(json.dumps({listing}))
        """)
        assert names == sorted(every), listing


def test_a_pass_not_yet_imported_is_found_by_name_and_its_file_imported_alone():
    found = run_fresh("""
        import json, sys
        from relax_mlir import transform
        from relax_mlir.transform import FuseOps
        alone = "relax_mlir.transform.fold_constant" not in sys.modules
        by_name = transform.PASSES["FoldConstant"].__name__, "FoldConstant" in transform.PASSES
        parsed = [type(p).__name__ for p in transform.parse_pipeline("ToNonDataflow,Gradient(func_name=main)")]
        print(json.dumps([FuseOps.name, alone, *by_name, parsed, type(transform.fuse_ops).__name__]))
    """)
    assert found == ["FuseOps", True, "FoldConstant", True, ["ToNonDataflow", "Gradient"], "module"]


def test_a_users_pass_named_as_a_pass_not_yet_imported_is_refused():
    message = run_fresh("""
        import json
        from relax_mlir import transform
        try:
            class Mine(transform.Pass):
                name = "FoldConstant"
        except ValueError as exc:
            print(json.dumps(str(exc)))
    """)
    assert message.startswith("pass name 'FoldConstant' of __main__.Mine is already taken by "
                              "relax_mlir.transform.fold_constant.FoldConstant")


def test_the_table_of_names_serves_every_registered_pass_from_its_own_file():
    every = every_pass_by_importing_each_file()
    assert {name: f"relax_mlir.transform.{transform._LAZY.get(name)}" for name in every} == every
    for name, module in transform._LAZY.items():
        assert getattr(transform, name).__module__ == f"relax_mlir.transform.{module}", name


def test_an_unknown_name_is_an_attribute_error():
    try:
        transform.NoSuchPass  # noqa: B018
    except AttributeError as exc:
        assert str(exc) == "module 'relax_mlir.transform' has no attribute 'NoSuchPass'"
    else:
        raise AssertionError("transform.NoSuchPass did not raise")


def test_the_package_serves_its_modules_as_attributes():
    """``import relax_mlir as rm; rm.analysis.well_formed(...)`` worked while importing the interpreter imported
    ``analysis`` as a side effect; the package serves each of its modules on first use."""
    code = ("import relax_mlir as rm, sys\n"
            "assert 'relax_mlir.analysis' not in sys.modules\n"
            "assert rm.analysis.well_formed is not None and rm.script.from_source is not None\n"
            "assert callable(rm.interpret)\n"
            "try:\n    rm.no_such_module\nexcept AttributeError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "module 'relax_mlir' has no attribute 'no_such_module'" in done.stdout
