"""TopologicalSort: the orders it may pick keep what the function does (oracle: the interpreter before and after
the pass, and the order in which a host function is called)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.interpreter import get_global_func
from relax_mlir.ir import assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

SORTS = [transform.TopologicalSort(order, direction) for order in ("depth-first", "breadth-first")
         for direction in ("from-inputs", "from-outputs")]

_TAGS: list = []


def _tags() -> list:
    """The host function ``test.topo_tag(x, t)``: records ``t``, returns ``x``."""
    if get_global_func("test.topo_tag", allow_missing=True) is None:
        relax_mlir.register_func("test.topo_tag", lambda x, t: (_TAGS.append(int(t)), x)[1])
    _TAGS.clear()
    return _TAGS


TAGS = """
        a = R.call_packed("test.topo_tag", x, R.prim_value(1), sinfo_args=R.Tensor((3,), "float32"))
        b = R.call_packed("test.topo_tag", y, R.prim_value(2), sinfo_args=R.Tensor((3,), "float32"))
        c = R.call_packed("test.topo_tag", y, R.prim_value(3), sinfo_args=R.Tensor((3,), "float32"))
        d = R.add(c, a)
        e = R.add(d, b)"""

HEAD = '''
@I.ir_module
class M:
    @R.function(pure=False)
    def f(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):'''

TAGGED_PLAIN = HEAD + TAGS + "\n        return e\n"
TAGGED_DATAFLOW = (HEAD + "\n        with R.dataflow():" + TAGS.replace("\n", "\n    ") + "\n            R.output(e)"
                   + "\n        return e\n")


@pytest.mark.parametrize("text", [TAGGED_PLAIN, TAGGED_DATAFLOW], ids=["plain-block", "dataflow-block"])
@pytest.mark.parametrize("the_pass", SORTS, ids=str)
def test_topological_sort_keeps_the_order_of_host_calls(the_pass, text):
    # from-outputs emitted c (tag 3) before a and b: the host saw [3, 1, 2]. A plain block is not sorted at all
    # (as TVM's pass); in a dataflow block (which relax-mlir's parser lets hold host calls) they keep their order.
    mod = from_source(text)
    tags = _tags()
    x, y = np.ones(3, "float32"), np.full(3, 2.0, "float32")
    want = relax_mlir.interpret(mod, "f", x, y)
    assert tags == [1, 2, 3]
    tags.clear()
    out = roundtrip(the_pass(mod))
    np.testing.assert_array_equal(relax_mlir.interpret(out, "f", x, y), want)
    assert tags == [1, 2, 3]


def test_topological_sort_leaves_plain_blocks_as_written():
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        a = R.exp(x)
        b = R.negative(x)
        c = R.log(a)
        d = R.add(c, b)
        return d
''')
    for the_pass in SORTS:
        assert_structural_equal(the_pass(mod), mod)


SIZED = '''
@I.ir_module
class M:
    @R.function
    def f(x: R.Tensor((3,), "float32"), y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        with R.dataflow():
            c = R.add(x, x)
            a = R.match_cast(y, R.Tensor((n,), "float32"))
            b = R.zeros(R.shape([n]), "float32")
            d = R.reshape(c, R.shape([3, 1]))
            e = R.add(d, b)
            k: R.Tensor(ndim=1, dtype="float32") = R.ones(R.shape([n]), "float32")
            g = R.sum(k)
            h = R.add(e, g)
            R.output(h)
        return h
'''


@pytest.mark.parametrize("the_pass", SORTS, ids=str)
def test_topological_sort_keeps_a_use_of_a_size_after_the_match_cast_defining_it(the_pass):
    # `b = R.zeros(R.shape([n]))` reads no variable of the block, only the size `n` the match_cast defines: it was
    # moved above the cast (WellFormedError: size variable n ... not defined). `k` mentions n only in its value
    # (its annotation has no shape).
    mod = from_source(SIZED)
    x, y = np.arange(3, dtype="float32"), np.ones(4, "float32")
    want = relax_mlir.interpret(mod, "f", x, y)
    out = roundtrip(the_pass(mod))
    np.testing.assert_array_equal(relax_mlir.interpret(out, "f", x, y), want)
    names = [b.var.name_hint for b in out["f"].body.blocks[0].bindings]
    assert names.index("a") < names.index("b") and names.index("a") < names.index("k"), names
