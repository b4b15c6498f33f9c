"""Pass infrastructure, with TVM's names: ``Pass``, ``Sequential``, ``PassContext``, ``function_pass``, instruments.

A pass maps an ``IRModule`` to a new one. ``PassContext`` carries the optimisation level, disabled passes and
instruments (timing, printing the IR after each pass); by default the result of every pass is checked with
``well_formed`` so a pass that breaks the IR is caught where it does.

    with PassContext(instruments=[PassTimingInstrument()]) as ctx:
        mod = Sequential([CanonicalizeBindings(), DeadCodeElimination()])(mod)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, Optional, Sequence, Union

from ..ir.expr import DataflowBlock, Function, SeqExpr
from ..ir.module import IRModule


class PassInstrument:
    """Hooks around every pass (override what you need), as TVM's ``instrument.PassInstrument``."""

    def enter_pass_ctx(self) -> None: ...
    def exit_pass_ctx(self) -> None: ...
    def should_run(self, mod: IRModule, info: "PassInfo") -> bool: return True
    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None: ...
    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None: ...


class PassTimingInstrument(PassInstrument):
    """Times every pass; ``render()`` gives a table, most expensive first."""

    def __init__(self):
        self.timings: list[tuple[str, float]] = []
        self._start: list[float] = []

    def run_before_pass(self, mod, info):
        self._start.append(time.perf_counter())

    def run_after_pass(self, mod, info):
        self.timings.append((info.name, time.perf_counter() - self._start.pop()))

    def render(self) -> str:
        total: dict[str, float] = {}
        for name, seconds in self.timings:
            total[name] = total.get(name, 0.0) + seconds
        rows = sorted(total.items(), key=lambda kv: -kv[1])
        return "\n".join(f"{seconds * 1e3:10.3f} ms  {name}" for name, seconds in rows)


class PrintAfterAll(PassInstrument):
    """Prints the module after every pass (``print_fn`` defaults to ``print``)."""

    def __init__(self, print_fn: Callable[[str], None] = print):
        self.print_fn = print_fn

    def run_after_pass(self, mod, info):
        self.print_fn(f"# IR after {info.name}\n{mod.script()}")


class PrintBeforeAll(PrintAfterAll):
    """Prints the module before every pass."""

    def run_before_pass(self, mod, info):
        self.print_fn(f"# IR before {info.name}\n{mod.script()}")

    def run_after_pass(self, mod, info):
        pass


class PassContext:
    """The settings passes run under. Use as a context manager; ``PassContext.current()`` is the innermost."""

    _stack: ClassVar[list["PassContext"]] = []

    def __init__(self, opt_level: int = 2, required_pass: Optional[Sequence[str]] = (),
                 disabled_pass: Optional[Sequence[str]] = (), instruments: Optional[Sequence[PassInstrument]] = (),
                 config: Optional[dict] = None, check_well_formed: bool = True):
        self.opt_level = opt_level  # None for a sequence means empty, as TVM's defaults
        self.required_pass = set(required_pass or ())
        self.disabled_pass = set(disabled_pass or ())
        self.instruments = list(instruments or ())
        self.config = dict(config or {})
        self.check_well_formed = check_well_formed

    @classmethod
    def current(cls) -> "PassContext":
        return cls._stack[-1] if cls._stack else _DEFAULT

    def __enter__(self) -> "PassContext":
        PassContext._stack.append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc) -> None:
        for inst in self.instruments:
            inst.exit_pass_ctx()
        PassContext._stack.pop()


_DEFAULT = PassContext()


class PassRegistry(MutableMapping):
    """The type of ``PASSES``: a mapping, name -> pass class, that imports every pass file before it answers a read
    of the whole (iteration, ``len``, ``keys``, ``items``, ``==``...) or a name it does not hold. The package imports
    a pass's file when one of the file's names is first used (``transform/__init__.py``), so until something lists
    the passes only those in use are registered; read through this mapping, the registry is always complete."""

    def __init__(self):
        self._passes: dict[str, type["Pass"]] = {}

    def loaded(self, name: str) -> Optional[type["Pass"]]:
        """The pass registered as ``name`` so far, or None (imports nothing: for the registration itself)."""
        return self._passes.get(name)

    def _import_all(self) -> None:
        from . import import_all_passes  # (the package's __init__ imports this module before it defines that)

        import_all_passes()

    def __getitem__(self, name: str) -> type["Pass"]:
        if name not in self._passes:
            self._import_all()
        return self._passes[name]

    def __contains__(self, name: object) -> bool:
        if name not in self._passes:
            self._import_all()
        return name in self._passes

    def __iter__(self) -> Iterator[str]:
        self._import_all()
        return iter(self._passes)

    def __len__(self) -> int:
        self._import_all()
        return len(self._passes)

    def __setitem__(self, name: str, cls: type["Pass"]) -> None:
        self._passes[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._passes[name]

    def __repr__(self) -> str:
        self._import_all()
        return repr(self._passes)


#: Every registered pass class by its name (TVM's spelling); filled as the classes are defined.
PASSES = PassRegistry()


@dataclass(frozen=True)
class PassInfo:
    """A pass's name (TVM's spelling), the opt level it needs, and the passes it requires."""

    name: str
    opt_level: int = 0
    required: tuple[str, ...] = ()


class Pass:
    """A module-to-module transformation. Subclasses implement ``transform_module``.

    A pass is data: a ``@dataclass(frozen=True)`` whose fields are its options. A class that sets ``name`` (TVM's
    name, e.g. ``"CanonicalizeBindings"``) is registered in ``PASSES`` when it is defined; bases without a name of
    their own (``FunctionPass``, ``ModePass``) are not.
    """

    name: ClassVar[str]
    opt_level: ClassVar[int] = 0
    #: Whether the pass handles ``R.If`` (its branches included). A pass of this package that does not say so is
    #: refused a module with one, naming itself and where the If is (``refuse_if``), rather than mishandling it; a
    #: pass of the user's is trusted (it is theirs to check).
    supports_if: ClassVar[Optional[bool]] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if not isinstance(name, str):
            return
        # A class of this package's is checked against the passes registered so far (the files define distinct
        # names; importing the other files from inside one being imported could meet it half-made). A user's is
        # checked against every pass of the package, as when the package imported them all.
        known = PASSES.loaded(name) if cls.__module__.startswith("relax_mlir.") else PASSES.get(name)
        # Only the same class defined again (its module reloaded) replaces itself: a user's class named as a
        # built-in (``class Normalize(Pass)``) is refused, not put in the built-in's place.
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"pass name {name!r} of {cls.__module__}.{cls.__qualname__} is already taken by "
                             f"{known.__module__}.{known.__qualname__}")
        PASSES[name] = cls

    def __post_init__(self):
        """Every option is checked against its annotation when the pass is made (``options.check_options``), in
        the words ``--passes`` uses; a pass with a ``__post_init__`` of its own calls this one first."""
        from .options import check_options

        check_options(self)

    @property
    def info(self) -> PassInfo:
        return PassInfo(self.name, self.opt_level)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__} does not implement transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.info.name}: expected an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        info = self.info
        if info.name in ctx.disabled_pass or (info.opt_level > ctx.opt_level and info.name not in ctx.required_pass):
            return mod
        if not all(inst.should_run(mod, info) for inst in ctx.instruments):
            return mod
        for inst in ctx.instruments:
            inst.run_before_pass(mod, info)
        if not self.handles_if():
            refuse_if(mod, info.name)
        out = self.transform_module(mod, ctx)
        if ctx.check_well_formed and not isinstance(self, Sequential):
            from ..ir.well_formed import check_well_formed

            check_well_formed(out, where=f"after {info.name}")
        for inst in ctx.instruments:
            inst.run_after_pass(out, info)
        return out

    def handles_if(self) -> bool:
        """Whether the pass may run on a module holding an ``R.If`` (see ``supports_if``)."""
        flag = type(self).supports_if
        return flag if flag is not None else not type(self).__module__.startswith("relax_mlir.")


def find_if(mod: IRModule) -> Optional[tuple[str, str]]:
    """``(function, binding)`` of the first ``R.If`` of ``mod`` (local functions searched too), or None. An If is
    always a binding's value (the normal form), so this reads bindings only: it runs before every pass."""
    from ..ir.expr import Function, If, SeqExpr

    def first_if(body) -> Optional[str]:
        if not isinstance(body, SeqExpr):
            return None
        for block in body.blocks:
            for binding in block.bindings:
                value = getattr(binding, "value", None)
                if isinstance(value, If):
                    return binding.var.name_hint
                if isinstance(value, Function) and (found := first_if(value.body)) is not None:
                    return found
        return None

    for name, func in mod.items():
        found = first_if(getattr(func, "body", None))
        if found is not None:
            return name, found
    return None


def refuse_if(mod: IRModule, pass_name: str) -> None:
    """Refuse, naming ``pass_name`` and where, a module holding an ``R.If``: for a pass written for straight-line
    code, which would mishandle the branches (or fail inside)."""
    found = find_if(mod)
    if found is not None:
        handled = ", ".join(sorted(n for n, cls in PASSES.items() if cls.supports_if))
        raise ValueError(f"{pass_name}: does not support R.If (function {found[0]!r}, binding {found[1]!r}); "
                         f"the passes that do: {handled}")


class FunctionPass(Pass):
    """Applies ``transform_function`` to each function (or only to ``func_name`` when the pass has one)."""

    func_name: Optional[str] = None

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        raise NotImplementedError(f"{type(self).__name__} does not implement transform_function")

    def transform_module(self, mod, ctx):
        names = list(mod) if self.func_name is None else [self.func_name]
        out = mod.copy()
        for name in names:
            if name not in mod:
                raise ValueError(f"{self.info.name}: the module has no function {name!r} "
                                 f"(it has: {', '.join(mod) or 'none'})")
            out[name] = self.transform_function(mod[name], out, ctx)
        return out


class DataflowBlockPass(FunctionPass):
    """Applies ``transform_dataflow_block`` to every dataflow block of every function."""

    def transform_dataflow_block(self, block: DataflowBlock, mod: IRModule, ctx: PassContext) -> DataflowBlock:
        raise NotImplementedError(f"{type(self).__name__} does not implement transform_dataflow_block")

    def transform_function(self, func, mod, ctx):
        if not isinstance(func.body, SeqExpr):
            return func
        blocks = [self.transform_dataflow_block(b, mod, ctx) if isinstance(b, DataflowBlock) else b
                  for b in func.body.blocks]
        if all(a is b for a, b in zip(blocks, func.body.blocks)):
            return func
        return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure)


class Sequential(Pass):
    """Runs passes in order (TVM's ``tvm.transform.Sequential``)."""

    supports_if = True  # (each of its passes says for itself)

    def __init__(self, passes: Optional[Iterable[Pass]] = None, opt_level: int = 0, name: str = "sequential"):
        self.passes = list(passes or ())  # None: no passes, as TVM's default
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential: expected passes, got {type(p).__name__}")
        self._name, self._opt_level = name, opt_level

    @property
    def info(self) -> PassInfo:
        return PassInfo(self._name, self._opt_level)

    def transform_module(self, mod, ctx):
        for p in self.passes:
            mod = p(mod)
        return mod


def _wrapped_pass(base: type, method: str, f, name: str, opt_level: int):
    """A pass of kind ``base`` whose ``method`` is ``f`` (a callable: the pass itself is returned) or is the
    method of the same name of an instance of ``f`` (a class: a pass class is returned, whose constructor
    arguments go to ``f``), as TVM's pass decorators do. Not registered in ``PASSES``: it is the user's."""

    def info(self) -> PassInfo:
        return PassInfo(name, opt_level)

    if isinstance(f, type):
        if not callable(getattr(f, method, None)):
            raise TypeError(f"{f.__name__}: a class decorated as a pass needs a {method}() method")

        def __init__(self, *args, **kwargs):  # noqa: N807 - the generated class's constructor
            self._inner = f(*args, **kwargs)

        def run(self, *args):
            return getattr(self._inner, method)(*args)

        return type(f.__name__, (base,), {"__init__": __init__, method: run, "info": property(info),
                                          "__doc__": f.__doc__, "__module__": f.__module__, "supports_if": True})

    if not callable(f):
        raise TypeError(f"a pass decorator expects a function or a class, got {type(f).__name__}")
    cls = type(f"{base.__name__}({name})", (base,), {method: lambda self, *args: f(*args), "info": property(info),
                                                     "__doc__": f.__doc__, "supports_if": True})
    return cls()


def function_pass(fn=None, *, opt_level: int = 0, name: Optional[str] = None) -> Union[Pass, Callable]:
    """Decorator: ``fn(func, mod, ctx) -> func`` becomes a pass over every function (a class with a
    ``transform_function`` method becomes a pass class)."""
    def wrap(f):
        return _wrapped_pass(FunctionPass, "transform_function", f, name or getattr(f, "__name__", ""), opt_level)
    return wrap(fn) if fn is not None else wrap


def module_pass(fn=None, *, opt_level: int = 0, name: Optional[str] = None) -> Union[Pass, Callable]:
    """Decorator: ``fn(mod, ctx) -> mod`` becomes a pass (a class with ``transform_module``, a pass class)."""
    def wrap(f):
        return _wrapped_pass(Pass, "transform_module", f, name or getattr(f, "__name__", ""), opt_level)
    return wrap(fn) if fn is not None else wrap


def dataflowblock_pass(fn=None, *, opt_level: int = 0, name: Optional[str] = None) -> Union[Pass, Callable]:
    """Decorator (TVM's ``relax.transform.dataflowblock_pass``): ``fn(block, mod, ctx) -> block`` becomes a pass
    over every dataflow block of every function; binding blocks outside dataflow are left alone (a class with
    ``transform_dataflow_block``, a pass class).

        @dataflowblock_pass(opt_level=0)
        def drop_unused(block, mod, ctx):
            return DataflowBlock([b for b in block.bindings if keep(b)])
    """
    def wrap(f):
        return _wrapped_pass(DataflowBlockPass, "transform_dataflow_block", f, name or getattr(f, "__name__", ""), opt_level)
    return wrap(fn) if fn is not None else wrap
