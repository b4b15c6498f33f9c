"""The Relax IR in Python: struct info, expressions, functions, modules, and the tools around them."""

from .block_builder import BlockBuilder, BlockBuilderError
from .dtype import DTYPES, FLOAT_DTYPES, INT_DTYPES
from .expr import (Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc, Function,
                   GlobalVar, If, MatchCast, PrimValue, SeqExpr, ShapeExpr, Span, StringImm, Tuple, TupleGetItem, Var,
                   VarBinding, const)
from .module import IRModule
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo)
from .structural_equal import assert_structural_equal, structural_equal, structural_hash
from .sym import SizeVar, SymDim
from .visitor import ExprMutator, ExprVisitor, post_order_visit
from .well_formed import WellFormedError, check_well_formed, well_formed
