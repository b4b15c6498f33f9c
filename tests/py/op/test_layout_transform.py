"""``R.layout_transform`` as TVMScript writes it: the index map a lambda (``T.index_map(lambda ...)`` as TVM's printer
writes it), read from the text without evaluating it, interpreted and compiled against NumPy's transpose/pad/reshape
(independent of the record's scatter reference), printed and parsed back, and differentiated by the inverse map."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op
from relax_mlir.interpreter import interpret
from relax_mlir.ir import TensorStructInfo, Var
from relax_mlir.op.layout import inverse_text, parse_index_map
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import relax as R
from relax_mlir.testing import roundtrip
from relax_mlir.transform.decompose_ops import DecomposeError

# A map named in the defining scope, as TVM's tests pass one (test_layout_transform in TVM's legalize tests).
transformation = lambda a, b, c: (a, c, b // 3, b % 3)  # noqa: E731


def _module(param: str, call: str):
    return from_source(f"@I.ir_module\nclass M:\n    @R.function\n    def main(x: {param}):\n"
                       f"        r = {call}\n        return r\n")


def _run_both(mod, *args):
    want = interpret(mod, "main", *args)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    return want, np.asarray(got)


def test_nchw_to_nhwc_from_a_lambda_matches_numpy_transpose_interpreted_and_compiled():
    mod = _module('R.Tensor((2, 3, 4, 5), "float32")',
                  "R.layout_transform(x, index_map=lambda n, c, h, w: (n, h, w, c), pad_value=None, "
                  "axis_separators=None, input_axis_separators=None)")
    assert mod["main"].ret_struct_info == TensorStructInfo((2, 4, 5, 3), "float32")
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want, got = _run_both(mod, x)
    np.testing.assert_array_equal(want, np.transpose(x, (0, 2, 3, 1)))
    np.testing.assert_array_equal(got, np.transpose(x, (0, 2, 3, 1)))


def test_nchw4c_packing_pads_the_channels_with_pad_value():
    # TVM's NCHW4c: c = 6 is padded to 8 with pad_value, then (n, c // 4, h, w, c % 4).
    mod = _module('R.Tensor((1, 6, 2, 3), "float32")',
                  "R.layout_transform(x, index_map=lambda n, c, h, w: (n, c // 4, h, w, c % 4), pad_value=-7.0)")
    assert mod["main"].ret_struct_info == TensorStructInfo((1, 2, 2, 3, 4), "float32")
    x = np.arange(36, dtype=np.float32).reshape(1, 6, 2, 3)
    padded = np.pad(x, ((0, 0), (0, 2), (0, 0), (0, 0)), constant_values=-7.0)
    expected = padded.reshape(1, 2, 4, 2, 3).transpose(0, 1, 3, 4, 2)
    want, got = _run_both(mod, x)
    np.testing.assert_array_equal(want, expected)
    np.testing.assert_array_equal(got, expected)
    assert want[0, 1, 1, 2, 1] == x[0, 5, 1, 2] and want[0, 1, 0, 0, 3] == -7.0  # hand-picked: c = 5 and padding


def test_tvm_printer_form_t_index_map_with_index_dtype_and_empty_separators_parses():
    mod = _module('R.Tensor((16,), "float32")',
                  'R.layout_transform(x, index_map=T.index_map(lambda i: (i // 4, i % 4), index_dtype="int32"), '
                  "pad_value=None, axis_separators=[], input_axis_separators=[])")
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.attrs["index_map"] == "lambda i: (i // 4, i % 4)"
    assert call.attrs["axis_separators"] is None and call.attrs["input_axis_separators"] is None
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(interpret(mod, "main", x), x.reshape(4, 4))


def test_a_map_named_in_the_defining_scope_is_traced_as_tvm_tests_pass_it():
    @R.function
    def main(x: R.Tensor((10, 21, 30), "float32")):
        gv = R.layout_transform(x, index_map=transformation, pad_value=2)
        return gv

    call = main.body.blocks[0].bindings[0].value
    assert call.attrs["index_map"] == "lambda a, b, c: (a, c, b // 3, b % 3)"
    x = np.random.default_rng(1).standard_normal((10, 21, 30)).astype(np.float32)
    expected = x.reshape(10, 7, 3, 30).transpose(0, 3, 1, 2)  # 21 = 7 * 3: no padding
    np.testing.assert_array_equal(interpret(relax_mlir.IRModule.from_expr(main), "main", x), expected)


def test_fusing_axes_matches_numpy_reshape():
    mod = _module('R.Tensor((3, 4, 5), "float32")', "R.layout_transform(x, lambda a, b, c: (c, a * 4 + b))")
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    want, got = _run_both(mod, x)
    np.testing.assert_array_equal(want, x.transpose(2, 0, 1).reshape(5, 12))
    np.testing.assert_array_equal(got, x.transpose(2, 0, 1).reshape(5, 12))


def test_the_map_prints_as_its_lambda_and_parses_back():
    mod = _module('R.Tensor((1, 6, 2, 3), "float32")',
                  "R.layout_transform(x, index_map=lambda n,c,h,w: (n, c//4, h, w, c%4), pad_value=1.5)")
    text = mod.script()
    # (the record's one required attribute is written by position, as the printer writes every op's; the map as
    # TVM's printer writes it)
    assert "R.layout_transform(x, T.index_map(lambda n, c, h, w: (n, c // 4, h, w, c % 4)), pad_value=1.5)" in text
    roundtrip(mod)


def test_the_lambda_is_read_not_evaluated():
    with pytest.raises(ParseError, match=r"<string>:5:13: relax.layout_transform: index_map \"lambda i: "
                                         r"\(__import__\('os'\).getpid\(\),\)\": __import__\('os'\).getpid\(\) is not "
                                         r"supported; an output index is an axis"):
        _module('R.Tensor((4,), "float32")', "R.layout_transform(x, index_map=lambda i: (__import__('os').getpid(),))")


def test_an_unsupported_map_is_refused_naming_the_map_and_what_is_expected():
    with pytest.raises(ParseError, match=r"index_map 'lambda i, j: \(i // 2, j\)': axis 'i' is used as i // 2; each "
                                         r"input axis must appear once, whole \(i\) or split by one factor"):
        _module('R.Tensor((4, 3), "float32")', "R.layout_transform(x, index_map=lambda i, j: (i // 2, j))")
    with pytest.raises(ParseError, match=r"index_map 'lambda i, j: \(i, j\)' takes 2 indices, but the input has "
                                         r"rank 3"):
        _module('R.Tensor((4, 3, 2), "float32")', "R.layout_transform(x, index_map=lambda i, j: (i, j))")


def test_a_python_callable_is_traced_into_the_same_text():
    x = Var("x", TensorStructInfo((2, 6), "float32"))
    call = op.layout_transform(x, lambda n, c: (c // 2, n, c % 2))
    assert call.attrs["index_map"] == "lambda n, c: (c // 2, n, c % 2)"
    assert call.struct_info == TensorStructInfo((3, 2, 2), "float32")


@pytest.mark.parametrize("text, inverse", [
    ("lambda n, c, h, w: (n, h, w, c)", "lambda i0, i1, i2, i3: (i0, i3, i1, i2)"),
    ("lambda n, c, h, w: (n, c // 4, h, w, c % 4)", "lambda i0, i1, i2, i3, i4: (i0, i1 * 4 + i4, i2, i3)"),
])
def test_the_gradient_of_a_move_or_exact_split_is_the_inverse_map(text, inverse):
    assert inverse_text(parse_index_map(text)) == inverse
    x = Var("x", TensorStructInfo((2, 8, 3, 5), "float32"))
    call = op.layout_transform(x, text)
    g = Var("g", call.struct_info)
    (dx,) = op.layout_transform.gradient(Var("y", call.struct_info), call, g)
    assert dx.op is op.layout_transform and dx.attrs["index_map"] == inverse
    assert dx.struct_info == x.struct_info
    # the inverse undoes the map (NumPy references both ways)
    data = np.random.default_rng(3).standard_normal((2, 8, 3, 5))
    back = op.layout_transform.reference(op.layout_transform.reference(data, **call.attrs), **dx.attrs)
    np.testing.assert_array_equal(back, data)


def test_the_gradient_of_a_padded_split_drops_the_padding():
    # d/dx sum(w * layout_transform(x)) is w laid back out, the padded positions dropped.
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((1, 6, 2, 2), "float32"), w: R.Tensor((1, 2, 2, 2, 4), "float32")):
        with R.dataflow():
            y = R.layout_transform(x, index_map=lambda n, c, h, w: (n, c // 4, h, w, c % 4), pad_value=3.0)
            p = R.multiply(y, w)
            s = R.sum(p)
            R.output(s)
        return s
''')
    grad = relax_mlir.transform.Gradient("main", require_grads=None)(mod)
    x = np.ones((1, 6, 2, 2), np.float32)
    w = np.random.default_rng(4).standard_normal((1, 2, 2, 2, 4)).astype(np.float32)
    _, (dx, _) = interpret(grad, "main_adjoint", x, w)
    expected = w.transpose(0, 1, 4, 2, 3).reshape(1, 8, 2, 2)[:, :6]
    np.testing.assert_allclose(dx, expected, rtol=1e-6)


def test_a_symbolic_axis_split_is_inferred_and_interpreted_and_its_decomposition_asks_for_static_sizes():
    mod = _module('R.Tensor(("n", 3), "float32")',
                  "R.layout_transform(x, index_map=lambda i, j: (i // 4, j, i % 4), pad_value=9.0)")
    assert str(mod["main"].ret_struct_info) == str(TensorStructInfo(("(n + 3) // 4", 3, 4), "float32"))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    expected = np.pad(x, ((0, 3), (0, 0)), constant_values=9.0).reshape(2, 4, 3).transpose(0, 2, 1)
    np.testing.assert_array_equal(interpret(mod, "main", x), expected)
    with pytest.raises(DecomposeError,
                       match=r"binding 'r' \(relax.layout_transform\): its decomposition needs static sizes of 'x'.*"
                             r"splits an axis of symbolic size in shape \(n, 3\)"):
        relax_mlir.transform.DecomposeOpsForInference()(mod)


@pytest.mark.parametrize("index_map, message", [
    (lambda i, j: (j, i) if i else (i, j), r"index_map tests i \(an `if` or a comparison on an index\)"),
    (lambda i, j: (i - 1, j), r"index_map computes with i: only \+, \* and // or % by an int are supported"),
    (lambda i, j: (abs(i), j), r"index_map computes with i: only \+, \* and // or % by an int are supported"),
])
def test_a_python_map_that_branches_or_computes_otherwise_is_refused_in_words(index_map, message):
    """A traced map took one branch of an ``if`` on an index for every index, and other operators leaked a bare
    TypeError naming the tracer."""
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    with pytest.raises(ValueError, match=message):
        op.layout_transform(x, index_map)


def test_a_python_map_takes_numpy_ints():
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    assert op.layout_transform(x, lambda i, j: (j, i * np.int64(1))).attrs["index_map"] == "lambda i, j: (j, i * 1)"


def test_a_fractional_pad_value_on_integer_data_is_refused():
    """It was truncated (2.7 padded with 2) where TVM raises."""
    x = Var("x", TensorStructInfo((3,), "int32"))
    with pytest.raises(ValueError, match=r"pad_value 2.7 is not a value of the data's dtype int32"):
        op.layout_transform(x, lambda i: (i // 2, i % 2), pad_value=2.7)
    assert op.layout_transform(x, lambda i: (i // 2, i % 2), pad_value=2.0).struct_info.shape == (2, 2)
