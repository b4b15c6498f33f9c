"""The text format: parsing by hand-written source, printing, round trips and parse errors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import (BlockBuilder, Constant, DataflowVar, Function, IRModule, ObjectStructInfo, PrimStructInfo,
                           PrimValue, SeqExpr, ShapeExpr, TensorStructInfo, Tuple, TupleStructInfo, Var,
                           structural_equal)
from relax_mlir.interpreter import interpret
from relax_mlir.ir.sym import SizeVar
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R
from relax_mlir.ir import assert_structural_equal
from relax_mlir.testing import roundtrip

batch_size = 8


@I.ir_module
class Tiny:
    I.module_attrs({"param_num": 2, "state_num": 0})

    @R.function
    def main(x: R.Tensor((batch_size, 4), "float32"), w: R.Tensor((4, 3), "float32")):
        R.func_attr({"note": "tiny"})
        with R.dataflow():
            lv = R.matmul(x, w)
            out = R.nn.relu(lv)
            R.output(out)
        return out


def test_decorated_module_keeps_names_and_python_values():
    f = Tiny["main"]
    assert [p.name_hint for p in f.params] == ["x", "w"]
    assert f.params[0].struct_info == TensorStructInfo((8, 4), "float32")
    assert f.attrs == {"note": "tiny"}
    assert Tiny.attrs == {"param_num": 2, "state_num": 0}
    bindings = f.body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == ["lv", "out"]
    assert isinstance(bindings[0].var, DataflowVar) and not isinstance(bindings[1].var, DataflowVar)
    assert f.ret_struct_info == TensorStructInfo((8, 3), "float32")
    roundtrip(Tiny)


def test_standalone_function():
    @R.function
    def f(x: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        y = R.exp(x)
        return y

    assert f.params[0].struct_info.shape == (SizeVar("n"), 3)
    roundtrip(f)



@I.ir_module
class WithOptions:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")):
        y = R.exp(x)
        return y


def test_function_decorator_with_options_inside_a_module_class():
    # ``@R.function(...)`` is one frame closer to the class body than bare ``@R.function``.
    assert isinstance(WithOptions, IRModule)
    assert WithOptions["main"].is_pure is False
    roundtrip(WithOptions)

SYMBOLIC = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m",), "float32")):
        with R.dataflow():
            a = R.add(x, y)
            b = R.sum(a, axis=[1], keepdims=True)
            t = (a, b)
            c = t[1]
            R.output(t, c)
        return (c, t)

    @R.function
    def caller(z: R.Tensor((5, 7), "float32"), w: R.Tensor((7,), "float32")):
        r = cls.main(z, w)
        first = r[0]
        return first
'''


def test_symbolic_dims_tuples_and_calls_between_functions():
    mod = from_source(SYMBOLIC)
    n, m = SizeVar("n"), SizeVar("m")
    main = mod["main"]
    assert main.ret_struct_info == TupleStructInfo([
        TensorStructInfo((n, 1), "float32"),
        TupleStructInfo([TensorStructInfo((n, m), "float32"), TensorStructInfo((n, 1), "float32")])])
    # The caller's result binds n=5, m=7 through the callee's signature.
    assert mod["caller"].ret_struct_info == TensorStructInfo((5, 1), "float32")
    roundtrip(mod)


def test_constants_shapes_prim_values_and_attrs_round_trip():
    text = '''
@I.ir_module
class M:
    I.module_attrs({"state": R.const([[1.5, -2.0]], "float32"), "names": ("a", "b"), "k": None})

    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        c = R.add(x, R.const(0.1, "float32"))
        d = R.clip(c, min=float("-inf"), max=2.5)
        s = R.shape([2, 3])
        p = R.prim_value(7)
        e = R.match_cast(d, R.Tensor(("a", "b"), "float32"))
        return (e, s, p)
'''
    mod = from_source(text)
    assert isinstance(mod.attrs["state"], np.ndarray) and mod.attrs["state"].dtype == np.float32
    body = mod["main"].body
    c_const = body.blocks[0].bindings[0].value.args[1]
    assert isinstance(c_const, Constant) and c_const.data.item() == np.float32(0.1)
    assert isinstance(body.blocks[0].bindings[2].value, ShapeExpr)
    assert isinstance(body.blocks[0].bindings[3].value, PrimValue)
    assert body.blocks[0].bindings[4].var.struct_info == TensorStructInfo(("a", "b"), "float32")
    roundtrip(mod)


_ONE_VALUE = ([(d, f) for d in ("float32", "float64", "float16") for f in (0.0, -0.0, 0.1, float("nan"), float("-inf"))]
              + [(d, f) for d in ("int32", "bool") for f in (0.0, 1.0)])


@pytest.mark.parametrize("dtype, fill", _ONE_VALUE)
def test_arrays_of_one_value_round_trip_bit_for_bit(dtype, fill):
    """An array of one repeated value (an optimizer's zero state) is written once and repeated by the printer:
    it reads back with the same bits, and an array that differs in one element only (0.0 among -0.0, -inf among
    inf) is written element by element. (A NaN is written ``float("nan")``, its sign and payload not kept.)"""
    value = np.array(fill).astype(dtype)
    for a in (np.full((3, 4, 2), value), np.full((1,), value), np.full((2, 0), value)):
        mod = IRModule({}, {"state": a})
        back = from_source(mod.script()).attrs["state"]
        assert back.dtype == a.dtype and back.shape == a.shape
        assert back.tobytes() == a.tobytes()
    if dtype.startswith("float") and not np.isnan(fill):
        mixed = np.full((4, 3), value)
        raw = mixed.reshape(-1).view(f"u{mixed.itemsize}")
        raw[7] ^= 1 << (8 * mixed.itemsize - 1)  # the sign bit of one element: -0.0 among 0.0, and so on
        back = from_source(IRModule({}, {"state": mixed}).script()).attrs["state"]
        assert back.tobytes() == mixed.tobytes()


def test_block_builder_modules_round_trip_with_duplicate_names():
    x = Var("x", TensorStructInfo((2, 2), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x), "x")  # same name hint as the parameter: printed as x_1
            b = bb.emit(op.add(a, x), "x")
            out = bb.emit_output(op.multiply(b, a))
        bb.emit_func_output(out)
    mod = bb.get()
    assert "x_1: " in mod.script() and "x1: " in mod.script()
    roundtrip(mod)


def test_non_dataflow_blocks_and_tuple_unpacking():
    text = '''
@R.function
def f(x: R.Tensor((6,), "float32")):
    parts = R.split(x, 2)
    a, b = parts
    with R.dataflow():
        c = R.add(a, b)
        R.output(c)
    d = R.multiply(c, c)
    return d
'''
    f = from_source(text)
    assert len(f.body.blocks) == 3
    roundtrip(f)


ERRORS = [
    ("def f(x: R.Tensor((2,), \"float32\")):\n    return y\n", 2, r"undefined variable 'y'"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = R.frobnicate(x)\n    return y\n", 2,
     r"unknown op R.frobnicate"),
    ("def f(x):\n    return x\n", 1, r"parameter 'x' of f needs a struct info annotation"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    with R.dataflow():\n        y = R.exp(x)\n    return y\n", 3,
     r"must end with R.output"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    return x\n    y = x\n", 3, r"statements after return"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y: R.Tensor((3,), \"float32\") = R.exp(x)\n    return y\n", 2,
     r"annotation R.Tensor\(\(3,\), dtype=\"float32\"\) does not match"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = R.add(x, R.const([1.0, 2.0, 3.0], \"float32\"))\n"
     "    return y\n", 2, r"relax.add: cannot broadcast shapes \(2,\) and \(3,\)"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = R.sum(x, axes=0)\n    return y\n", 2,
     r"relax.sum: unknown argument 'axes'; it takes x, axis, keepdims"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = R.add(x, x, x)\n    return y\n", 2,
     r"relax.add: too many arguments: got 3, takes at most 2 \(x1, x2\)"),  # (the third is no attribute)
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = cls.g(x)\n    return y\n", 2, r"need an @I.ir_module"),
    # TVM's TupleGetItem takes an int: True was read as index 1 and printed back as t[True]
    ("def f(t: R.Tuple(R.Tensor((2,), \"float32\"), R.Tensor((2,), \"float32\"))):\n    y = t[True]\n    return y\n",
     2, r"a tuple index must be an integer, got `True`"),
    ("def f(x: R.Tensor((2,), \"floa32\")):\n    return x\n", 1, r"unknown dtype 'floa32'"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    y = R.exp(x\n    return y\n", 2, r"invalid syntax"),
    ("def f(x: R.Tensor((2,), \"float32\")) -> R.Tensor((2,), \"int32\"):\n    return x\n", 1,
     r"returns R.Tensor\(\(2,\), dtype=\"float32\"\) but is annotated"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    while x:\n        y = x\n    return x\n", 2,
     r"unsupported statement .*expected an assignment"),
    ("x = 1\n", 1, r"expected an @I.ir_module class or an @R.function"),
    ("@R.function\ndef f(x: R.Tensor((2,), \"float32\")):\n    return x\0\n", 3, r"3:13: a NUL character"),
    ("@R.function(private=5)\ndef f(x: R.Tensor((2,), \"float32\")):\n    return x\n", 1,
     r"private must be True or False, got 5"),
    ("@R.function(True)\ndef f(x: R.Tensor((2,), \"float32\")):\n    return x\n", 1, r"options by keyword"),
    # a dataflow variable R.output does not name is not visible after its block: returned, used later, or in the
    # next block (well_formed refused such a module only at the first pass, which it then blamed)
    ("def f(x: R.Tensor((2,), \"float32\")):\n    with R.dataflow():\n        y = R.exp(x)\n        z = R.exp(y)\n"
     "        R.output(z)\n    return y\n", 6, r"'y' is a dataflow variable of the block at line 3: only what its "
     r"R.output names is visible"),
    ("def f(x: R.Tensor((2,), \"float32\")):\n    with R.dataflow():\n        y = R.exp(x)\n        z = R.exp(y)\n"
     "        R.output(z)\n    with R.dataflow():\n        w = R.add(z, y)\n        R.output(w)\n    return w\n", 7,
     r"'y' is a dataflow variable of the block at line 3"),
]


def test_errors_in_a_decorated_class_point_at_the_file_s_columns():
    def build():
        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), "float32")):
                y = R.frobnicate(x)
                return y
    with pytest.raises(ParseError) as info:
        build()
    path, line, column = re.match(r"(.*):(\d+):(\d+): unknown op R.frobnicate", str(info.value)).groups()
    text = open(path).read().splitlines()[int(line) - 1]
    assert text.index("R.frobnicate") + 1 == int(column)


@pytest.mark.parametrize("text,line,message", ERRORS)
def test_parse_errors_give_line_and_column_and_what_was_expected(text, line, message):
    with pytest.raises(ParseError) as info:
        from_source("@R.function\n" + text if text.startswith("def") else text)
    msg = str(info.value)
    expected_line = line + 1 if text.startswith("def") else line
    assert re.match(rf"<string>:{expected_line}:\d+: ", msg), msg
    assert re.search(message, msg), msg


def test_module_errors():
    with pytest.raises(ParseError, match=r"call to unknown function cls.g \(the module defines: f\)"):
        from_source("@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Tensor((2,), 'float32')):\n"
                    "        y = cls.g(x)\n        return y\n")
    with pytest.raises(ParseError, match=r"function 'f' is defined twice"):
        from_source("@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Tensor((2,), 'float32')):\n"
                    "        return x\n    @R.function\n    def f(x: R.Tensor((2,), 'float32')):\n        return x\n")


def test_module_interface():
    mod = IRModule({"main": Tiny["main"]})
    assert "main" in mod and mod.get_global_var("main").name_hint == "main"
    mod2 = mod.with_attrs({"param_num": 2})
    assert mod2.attrs == {"param_num": 2} and mod.attrs == {}
    mod2["other"] = Tiny["main"]
    assert list(mod2) == ["main", "other"] and "other" not in mod
    with pytest.raises(KeyError, match=r"no function 'nope' \(it has: main, other\)"):
        mod2["nope"]
    with pytest.raises(TypeError, match="expected a relax Function"):
        mod2["bad"] = 3
    assert isinstance(R.Object, ObjectStructInfo)


@pytest.mark.parametrize("expr, message", [
    ("R.add(x, " + "1" + "0" * 40 + ")", r"<string>:4:18: R.const: the integer 1000+ does not fit int64"),
    ("(" * 300 + "x" + ")" * 300, r"<string>:4:\d+: invalid syntax: too many nested parentheses"),
    ("-" * 200000 + "x", r"<string>:1:1: the text nests too deeply for Python's parser \(MemoryError\)"),
])
def test_literals_and_nesting_beyond_limits_are_parse_errors(expr, message):
    """Found by scripts/fuzz_parser.py: a literal no dtype holds, and brackets nested beyond CPython's parser."""
    text = f'\n@R.function\ndef f(x: R.Tensor((2,), "float32")):\n    y = {expr}\n    return y\n'
    with pytest.raises(ParseError, match=message):
        from_source(text)


_F = "@R.function\ndef {name}(x: R.Tensor((2,), 'float32')):\n{body}"
_RETURN = "    return x\n"


@pytest.mark.parametrize("text, message", [
    (_F.format(name="f", body=_RETURN) + _F.format(name="g", body=_RETURN),
     r"<string>:5:1: the text defines 2 modules or functions \(f \(line 2\), g \(line 5\)\); it is read as one"),
    ("@R.function\nclass M:\n    @R.function\n    def f(x: R.Tensor((2,), 'float32')):\n        return x\n",
     r"<string>:1:2: class M: expected the decorator @I.ir_module"),
    (_F.format(name="f", body="    with R.dataflow() as block:\n        y = R.exp(x)\n        R.output(y)\n"
                              "    return y\n"), r"<string>:3:10: expected `with R.dataflow\(\):` \(no arguments, no `as`\)"),
    (_F.format(name="f", body="    with R.dataflow():\n        y = R.exp(x)\n        R.output(y, z=y)\n    return y\n"),
     r"<string>:5:21: R.output takes variable names, not keyword arguments"),
    (_F.format(name="f", body="    y = R.tuple(x, a=x)\n    return y\n"),
     r"<string>:3:20: R.tuple takes its fields as positional arguments"),
])
def test_text_the_parser_would_have_misread_is_refused(text, message):
    """Found by fuzzing: a second definition was ignored, a class's wrong decorator, ``as`` on ``R.dataflow()`` and
    keywords of ``R.output``/``R.tuple`` were dropped without a word; each is now a ParseError at its place."""
    with pytest.raises(ParseError, match=message):
        from_source(text)


def test_plain_python_definitions_beside_one_relax_definition_are_not_read():
    """A file's helper functions (undecorated) beside its one ``@R.function`` or ``@I.ir_module``: the decorated
    one is read, wherever it is."""
    f = from_source("def helper():\n    pass\n\n" + _F.format(name="f", body=_RETURN))
    assert [p.name_hint for p in f.params] == ["x"]
    mod = from_source("import numpy as np\n\ndef helper():\n    return 1\n\n@I.ir_module\nclass M:\n"
                      "    @R.function\n    def f(x: R.Tensor((2,), 'float32')):\n        return x\n")
    assert list(mod) == ["f"]


def test_a_standalone_function_prints_with_its_name_and_reads_back_equal():
    """``@R.function def scale`` prints as ``def scale`` (it printed ``def main``, TVM prints its name); the name
    is not part of the function: what it prints reads back structurally equal, and a transformed copy keeps it."""
    from relax_mlir.ir.structural_equal import structural_equal

    f = from_source(_F.format(name="scale", body="    y = R.multiply(x, x)\n    return y\n"))
    text = f.script()
    assert "\ndef scale(x: R.Tensor((2,), dtype=\"float32\"))" in text and "def main" not in text, text
    back = from_source(text)
    assert back.name_hint == "scale" and structural_equal(back, f)
    assert f.with_attr("note", 1).script().count("def scale(") == 1
    assert f.script("other").count("def other(") == 1  # an explicit name still wins


# TVM's printer declares each symbolic size in the body (`n = T.int64()`); its tests also declare them in Python.
_TVM_PRINTED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), dtype="float32")) -> R.Tensor(("n * m",), dtype="float32"):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            a: R.Tensor((n * m,), dtype="float32") = R.reshape(x, R.shape([n * m]))
            R.output(a)
        return a
'''


def test_size_declarations_of_tvm_text_read_as_the_sizes_they_name():
    declared = from_source(_TVM_PRINTED)
    plain = from_source(_TVM_PRINTED.replace("        n = T.int64()\n        m = T.int64()\n", "")
                        .replace("(n * m,)", '("n * m",)').replace("[n * m]", '["n * m"]'))
    assert_structural_equal(declared, plain)
    assert declared["main"].ret_struct_info.shape == (SizeVar("m") * SizeVar("n"),)
    roundtrip(declared)


def test_size_declared_in_python_or_in_the_body_is_a_size_not_the_python_value():
    from relax_mlir.script import tir as T

    k = T.int64()
    n = 8  # the signature reads Python's n; the body's declaration makes `n` a size from there on

    @I.ir_module
    class Mod:
        @R.function
        def f(x: R.Tensor((k, n), "float32")):
            n = T.int64()
            y = R.reshape(x, (k * 8,))
            z = R.match_cast(y, R.Tensor((n,), "float32"))
            return z

    f = Mod["f"]
    assert f.params[0].struct_info.shape == (SizeVar("k"), 8)
    assert f.body.body.struct_info.shape == (SizeVar("n"),)  # (the result; the return erases it: no parameter's n)
    assert f.ret_struct_info == TensorStructInfo(None, "float32", ndim=1)
    assert k == SizeVar("k") and str(k * 2) == "2 * k"


@pytest.mark.parametrize("declaration, message", [
    ("m = T.int64(5)", "takes no value here; a constant dimension is written as a number"),
    ("a, b = T.int64()", "declares one symbolic size: write `n = T.int64()`"),
    ("m = T.int32(is_size_var=True, dtype='x')", "takes no value here"),
])
def test_size_declarations_used_wrongly_are_parse_errors(declaration, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        from_source(_TVM_PRINTED.replace("m = T.int64()", declaration))


def test_a_size_declaration_in_python_needs_a_name():
    from relax_mlir.script import tir as T

    with pytest.raises(TypeError, match="named by the variable it is assigned to"):
        [T.int64()]


def test_two_sizes_declared_on_one_python_line_are_refused():
    from relax_mlir.script import tir as T

    with pytest.raises(TypeError, match="on a line of its own"):
        n = T.int64(); m = T.int64()  # noqa: E702 - the case: both were named n
    k = T.int64()  # a comment may follow
    assert k == SizeVar("k")


def test_a_declared_size_inside_op_attributes_is_the_size():
    n = 5  # noqa: F841 - Python's n, which the body's declaration overrides

    @I.ir_module
    class Mod:
        @R.function
        def f(x: R.Tensor(("n", 2), "float32")):
            n = T.int64()
            z = R.zeros((n, 2), "float32")
            y = R.reshape(x, (n * 2,))
            s = R.strided_slice(x, axes=[0], begin=[0], end=[n])
            return (z, y, s)

    from relax_mlir.script import tir as T  # noqa: F401 - the name the body's declaration reads
    text = Mod.script()
    for mod in (Mod, from_source(text)):
        x = np.arange(6, dtype="float32").reshape(3, 2)
        z, y, s = interpret(mod, "f", x)
        assert z.shape == (3, 2) and y.tolist() == x.ravel().tolist() and s.tolist() == x.tolist()


@pytest.mark.parametrize("text, message", [
    ("def main(x: R.Tensor((2,), 'float32'), x: R.Tensor((2,), 'float32')):", "duplicate parameter 'x'"),
    ("def main(x: R.Tensor((2,), 'float32'), /):", "only plain positional parameters"),
])
def test_parameters_python_would_refuse_are_parse_errors(text, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        from_source(f"@R.function\n{text}\n    return x\n")


@pytest.mark.parametrize("value, at, kind", [('b"xx"', 23, "bytes"), ("1j", 23, "complex"), ("...", 23, "ellipsis"),
                                             ('{"b": (1, 2j)}', 33, "complex")])
def test_attribute_values_the_printer_cannot_write_are_parse_errors(value, at, kind):
    text = f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    R.func_attr({{"a": {value}}})\n    return x\n'
    with pytest.raises(ParseError, match=f"<string>:3:{at}: attribute value of type {kind} is not supported"):
        from_source(text)


def test_a_global_symbol_that_is_no_name_stays_an_attribute():
    text = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    R.func_attr({"global_symbol": "my func"})\n' \
           "    return x\n"
    f = from_source(text)
    printed = f.script()
    assert "def main(" in printed and '"global_symbol": "my func"' in printed
    assert_structural_equal(from_source(printed), f)
    with pytest.raises(ValueError, match="'my func' is not a Python identifier"):
        f.script("my func")


@pytest.mark.parametrize("call", ["R.arange(0, 10, 1e-320)", 'R.arange(0, float("inf"), 1)'])
def test_an_arange_of_no_finite_length_is_a_parse_error(call):
    text = f"@R.function\ndef main(x: R.Tensor((2,), 'float32')):\n    y = {call}\n    return y\n"
    with pytest.raises(ParseError, match="<string>:3:9: OverflowError"):
        from_source(text)


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 4), (0,), (3, 0)])
def test_an_empty_constant_reads_back_with_its_shape(shape):
    b = BlockBuilder()
    x = Var("x", TensorStructInfo((2,), "float32"))
    with b.function("main", [x]):
        b.emit_func_output(Tuple([x, Constant(np.zeros(shape, "int32"))]))
    mod = b.get()
    back = roundtrip(mod)
    assert back["main"].body.body.fields[1].data.shape == shape


@pytest.mark.parametrize("shape, message", [("(0, -1)", "non-negative ints"), ("(2, 2)", "does not hold the 0"),
                                            ('"x"', "must be a tuple")])
def test_a_constant_shape_that_does_not_fit_is_a_parse_error(shape, message):
    text = f'@R.function\ndef main():\n    z = R.const([], "float32", shape={shape})\n    return z\n'
    with pytest.raises(ParseError, match=message):
        from_source(text)


def _x_plus_y_squared(hint: str) -> IRModule:
    """``x + y`` with ``y = x * x`` a variable named ``hint``."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(op.multiply(x, x), name_hint=hint)
        bb.emit_func_output(bb.emit(op.add(x, y)))
    return bb.get()


@pytest.mark.parametrize("hint, printed", [("\U0001d465", "x_1"), ("\u211b", "R_"), ("\uff49\uff46", "v")])
def test_variable_names_python_reads_as_another_are_printed_as_it_reads_them(hint, printed):
    """Python reads identifiers in NFKC form: a variable 𝑥 beside the parameter x was written as 𝑥 and read back as
    x, so ``x + 𝑥`` became ``𝑥 + 𝑥`` (other values). Names are written in NFKC form and made unique in it (ℛ is R,
    the namespace's name: R_; ｉｆ is the keyword if: v)."""
    mod = _x_plus_y_squared(hint)
    text = mod.script()
    assert f"{printed}: R.Tensor" in text and f"R.add(x, {printed})" in text and hint not in text
    again = roundtrip(mod)  # structurally equal, and printed again the same text
    a = np.array([2.0, 3.0], np.float32)
    np.testing.assert_array_equal(interpret(again, "main", a), a + a * a)
    np.testing.assert_array_equal(interpret(mod, "main", a), a + a * a)


def test_a_function_name_python_reads_as_another_is_not_printed():
    """A function's name is the module's key, which the printer cannot rename: ``ﬁ`` (read back as ``fi``) is
    refused with the name Python reads, not written as text that means another module."""
    from relax_mlir.ir.printer import format_function

    func = _x_plus_y_squared("y")["main"]
    with pytest.raises(ValueError, match=r"IRModule\['ﬁ'\]: a function's name must be in NFKC form"):
        IRModule({"\ufb01": func})  # where the name is given
    with pytest.raises(ValueError, match=r"function name 'ﬁ' cannot be written: Python reads the identifier as 'fi'"):
        format_function(func, "\ufb01")  # a function printed on its own, under a name no module checked


def test_attribute_values_built_directly_print_in_the_form_they_read_back():
    """A NumPy bool (``np.True_``) could not be printed ("cannot write attribute value of type bool"), and a list
    printed ``[1, 2]`` read back as the tuple ``(1, 2)``, printed ``(1, 2)``: not a fixed point (two compile-cache
    keys). Sequences are written as tuples, the form the parser and the ops store."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    attrs = {"flag": np.float32(1) > 0, "n": np.int64(3), "sizes": [1, 2], "nested": {"k": [[1], (2,)]}}
    mod = IRModule({"main": Function([x], SeqExpr([], x), x.struct_info, attrs)}, {"shape": [4, [5]]})
    text = mod.script()
    assert 'R.func_attr({"flag": True, "n": 3, "sizes": (1, 2), "nested": {"k": ((1,), (2,))}})' in text
    assert 'I.module_attrs({"shape": (4, (5,))})' in text
    again = roundtrip(mod)
    assert again["main"].attrs == {"flag": True, "n": 3, "sizes": (1, 2), "nested": {"k": ((1,), (2,))}}
    a = np.array([2.0, 3.0], np.float32)
    np.testing.assert_array_equal(interpret(again, "main", a), interpret(mod, "main", a))


@pytest.mark.parametrize("value, dtype", [(-1.5, "float32"), (float("nan"), "float32"), (float("inf"), "float64"),
                                          (float("-inf"), "float32"), (-2, "int64"), (1.5, "float32")])
def test_prim_values_negative_or_not_finite_read_back(value, dtype):
    """The printer writes ``R.prim_value(-1.5, "float32")``, ``R.prim_value(float("nan"), ...)`` and
    ``R.Prim(value=float("inf"), ...)``; the parser read any value but a plain constant as a size expression and
    refused them."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    mod = IRModule({"main": Function([x], SeqExpr([], PrimValue(value, dtype)), PrimStructInfo(dtype, value))})
    text = mod.script()
    assert "R.prim_value(" in text and "R.Prim(value=" in text
    again = roundtrip(mod)
    assert again["main"].ret_struct_info == PrimStructInfo(dtype, value)
    result = again["main"].body.body
    assert isinstance(result, PrimValue) and result.dtype == dtype
    assert result.value == value or math.isnan(value) and math.isnan(result.value)
    # (a NaN is another object after the round trip, and PrimStructInfo compares values with ==: every NaN is kept
    # as math.nan, and the interpreter's check of a result against R.Prim(value=nan) takes a NaN)
    a = np.zeros(2, np.float32)
    np.testing.assert_array_equal(interpret(again, "main", a), value)
    np.testing.assert_array_equal(interpret(mod, "main", a), value)


@pytest.mark.parametrize("value, at, message", [
    ('[None, 1.0], "float32"', "None", r"element \[0\] of the value is None, not a number"),
    ('None, "int32"', "None", r"the value is None, not a number"),
    ('[[1, 2], [3, "a"]], "int32"', '"a"', r"element \[1\]\[1\] of the value is 'a', not a number"),
    ('[1.0, {"k": 1}], "float32"', "{", r"element \[1\] of the value is \{'k': 1\}, not a number"),
])
def test_a_constant_element_that_is_no_number_is_a_parse_error_at_it(value, at, message):
    """``R.const([None, 1.0], "float32")`` read None as NaN (NumPy's conversion), silently; with an int dtype it
    was NumPy's raw message."""
    line = f"    y = R.add(x, R.const({value}))"
    text = f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n{line}\n    return y\n'
    with pytest.raises(ParseError, match=rf"<string>:3:{line.index(at) + 1}: R.const: {message}"):
        from_source(text)


def test_a_lone_surrogate_is_a_parse_error_in_text_and_an_escape_in_printed_strings():
    """A str may hold a lone surrogate (bytes decoded with errors="surrogateescape"), a text cannot: from_source
    raised UnicodeEncodeError, and a module whose string attribute held one printed text that did not parse."""
    text = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    R.func_attr({"note": "\ud800"})\n    return x\n'
    with pytest.raises(ParseError, match=r"<string>:3:27: a lone surrogate \(U\+D800\)"):
        from_source(text)
    note = b"caf\xff \xed\xa0\x80".decode("utf-8", "surrogateescape")
    x = Var("x", TensorStructInfo((2,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x], attrs={"note": note}):
        bb.emit_func_output(bb.emit(op.add(x, x)))
    mod = bb.get()
    printed = mod.script()
    assert '"caf\\udcff \\udced\\udca0\\udc80"' in printed
    printed.encode("utf-8")  # text: every character has its UTF-8
    again = roundtrip(mod)
    assert again["main"].attrs["note"] == note and structural_equal(again, mod)
    a = np.array([2.0, 3.0], np.float32)
    np.testing.assert_array_equal(interpret(again, "main", a), a + a)


_X23 = '@R.function\ndef f(x: R.Tensor((2, 3), "float32")):\n'


@pytest.mark.parametrize("text, at, message", [
    (_X23 + "    y = R.sum(x, axis=0, keepdims=True, axis=1)\n    return y\n", "axis=1", "R.sum: argument 'axis'"),
    ("@R.function(pure=False, pure=True)\ndef f(x: R.Tensor((2, 3), 'float32')):\n    return x\n", "pure=True",
     "R.function: argument 'pure'"),
    (_X23 + "    y = R.call_packed('g', x, sinfo_args=R.Object, sinfo_args=R.Tensor((2, 3), 'float32'))\n"
            "    return y\n", "sinfo_args=R.T", "R.call_packed: argument 'sinfo_args'"),
    (_X23 + "    y = R.add(x, x)\n    z = R.match_cast(y, R.Tensor(ndim=2, dtype='float32', ndim=1))\n    return z\n",
     "ndim=1", "R.Tensor: argument 'ndim'"),
])
def test_a_keyword_given_twice_is_a_parse_error_at_the_second(text, at, message):
    """Python's compiler refuses ``f(a=1, a=2)`` ("keyword argument repeated"), ``ast.parse`` does not: the text
    reader kept the last one silently (``R.sum(x, axis=0, keepdims=True, axis=1)`` read as ``axis=(1,)``,
    ``@R.function(pure=False, pure=True)`` as pure)."""
    line = next(i for i, s in enumerate(text.splitlines(), 1) if at in s)
    column = text.splitlines()[line - 1].index(at) + 1
    with pytest.raises(ParseError, match=re.escape(f"<string>:{line}:{column}: {message} given twice")):
        from_source(text)


def test_a_keyword_an_op_does_not_take_is_named_before_its_value_is_read():
    """``R.add(x, y=x)`` said "undefined name 'x' in an attribute": the value was read as an attribute before the
    keyword was looked up."""
    with pytest.raises(ParseError, match=re.escape("<string>:3:18: relax.add: unknown argument 'y'; it takes x1, x2")):
        from_source(_X23 + "    y = R.add(x, y=x)\n    return y\n")


@pytest.mark.parametrize("target, column", [("a, *b", 8), ("(a, b), c", 5)])
def test_a_tuple_target_that_is_not_a_name_is_reported_in_the_file(target, column):
    """The error built its own location: ``<string>`` whatever the file, and lines of the class, not of the file,
    in decorator mode."""
    text = f'@R.function\ndef f(x: R.Tensor((4,), "float32")):\n    {target} = R.split(x, 2)\n    return x\n'
    with pytest.raises(ParseError, match=re.escape(f"model.py:3:{column}: expected a variable name in the tuple on "
                                                   "the left of `=`, got `")):
        from_source(text, filename="model.py")


def test_a_tuple_target_error_in_a_decorated_class_points_at_the_file():
    def build():
        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                a, *b = R.split(x, 2)
                return a
    with pytest.raises(ParseError) as info:
        build()
    path, line, column = re.match(r"(.*):(\d+):(\d+): expected a variable name", str(info.value)).groups()
    assert path == __file__
    assert open(path).read().splitlines()[int(line) - 1].index("*b") + 1 == int(column)


_RETURN_PRIM = "@R.function\ndef main():\n    return R.prim_value({value}, {dtype!r})\n"


@pytest.mark.parametrize("value, dtype, largest", [("1e10", "float16", "65504"), ("65520.0", "float16", "65504"),
                                                   ("-1e300", "float32", "3.4028235e+38"),
                                                   ("1e39", "bfloat16", "3.3895314e+38"), ("2 ** 1024", "float64", "")])
def test_a_prim_value_a_float_dtype_cannot_hold_is_refused(value, dtype, largest):
    """``R.prim_value(1e10, "float16")`` was read, and interpreted to 1e10 (float16's largest is 65504), where
    ``R.const`` refuses the value and ``R.prim_value(300, "int8")`` is refused; ``R.Prim`` annotations alike."""
    number = eval(value)
    message = f"{number!r} does not fit in {dtype} (largest finite value {largest}"
    with pytest.raises(ValueError, match=re.escape(f"PrimValue: {message}")):
        PrimValue(number, dtype)
    if "**" in value:  # (the text writes no such expression as a prim value)
        return
    with pytest.raises(ParseError, match=re.escape(f"<string>:3:12: PrimValue: {message}")):
        from_source(_RETURN_PRIM.format(value=value, dtype=dtype))
    annotated = f"@R.function\ndef main(p: R.Prim({dtype!r}, {value})):\n    return p\n"
    with pytest.raises(ParseError, match=re.escape(f"<string>:2:13: R.Prim: {message}")):
        from_source(annotated)


@pytest.mark.parametrize("value, dtype", [("65504.0", "float16"), ("65519.0", "float16"), ("-65519", "float16"),
                                          ('float("inf")', "float16"), ('float("-inf")', "bfloat16"),
                                          ('float("nan")', "float16"), ("1e300", "float64"), ("3e38", "float32")])
def test_a_prim_value_its_float_dtype_holds_or_rounds_to_is_read(value, dtype):
    """The edge: a value that rounds to the largest finite one (65519 in float16) fits; inf and nan are values of
    every float dtype."""
    f = from_source(_RETURN_PRIM.format(value=value, dtype=dtype))
    number = float(eval(value))
    got = f.body.body.value
    assert got == number or math.isnan(number) and math.isnan(got)
    roundtrip(f)


@pytest.mark.parametrize("value", ["3", "None", '("main",)', "1.5"])
def test_a_global_symbol_that_is_not_a_string_is_a_parse_error_at_it(value):
    """``R.func_attr({"global_symbol": 3})`` parsed, passed well_formed and compiled; the CLI then failed on the
    module looked up by that name (a TypeError traceback)."""
    line = f'    R.func_attr({{"note": "n", "global_symbol": {value}}})'
    text = f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n{line}\n    return x\n'
    with pytest.raises(ParseError, match=re.escape(f"<string>:3:{line.index(value) + 1}: R.func_attr: global_symbol "
                                                   f"must be a string (the name the function is exported by), got "
                                                   f"{eval(value)!r}")):
        from_source(text)


def test_a_size_declared_in_python_is_named_as_python_reads_its_name():
    """``xﬁ = T.int64()`` binds the Python name ``xfi`` (identifiers are read in NFKC form): the size is ``xfi``,
    the name the annotations that use it read back (a size ``xﬁ`` printed as ``"xﬁ"`` read back as another)."""
    from relax_mlir.script import tir as T

    xﬁ = T.int64()  # noqa: F841 - the declaration is the case
    assert xfi == SizeVar("xfi")  # noqa: F821 - Python's name for xﬁ
