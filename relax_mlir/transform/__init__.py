"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure."""

from .pass_infra import (DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, function_pass, module_pass)
