"""The error slot of a compiled module: where runtime checks in compiled code record a violation.

``legalize/checks.py`` writes the IR side (a global ``memref<4xi64>`` holding ``[check id, value, position,
extent]``,
the function ``relax_mlir_error_address`` returning its address, the module attribute ``relax_mlir.checks``
with one message per check), and so does ``alloc_checks.py`` for an allocation that failed, in every module that
allocates; this module is the runtime side: finding the slot in a compiled engine and turning what it holds into
an ``IndexError``, a ``ValueError`` (a size check) or a ``MemoryError`` (an allocation).
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # MLIR is imported where used: the call path runs without it
    from mlir import ir

ERROR_GLOBAL = "relax_mlir_error"
ERROR_ADDRESS_FN = "relax_mlir_error_address"
CHECKS_ATTR = "relax_mlir.checks"
# A unit attribute on a module compiled with checks=False: its lowerings emit no runtime index checks.
CHECKS_OFF_ATTR = "relax_mlir.checks_off"
#: The slot's int64 words: check id, value, position, extent (the size a dynamic check compared against; libraries
#: written before it was added have three, and say so by not naming ``error_slot_words`` in their metadata).
SLOT_WORDS = 4


def check_messages(module: ir.Module) -> list[str]:
    """The check messages of a module (before or after lowering), in check-id order."""
    from mlir import ir  # lazily: the rest of this module serves libraries loaded without MLIR

    attrs = module.operation.attributes
    if CHECKS_ATTR not in attrs:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[CHECKS_ATTR])]


#: One lock per error slot (by address): every function of a module shares its slot, and a library loaded
#: twice (the same bytes are mapped once) shares it across modules, so a call and the read of what it recorded
#: must not interleave with another call of any of them (a failed check was reported by another thread's valid
#: call, and the failing call returned its results).
_SLOT_LOCKS: dict[int, threading.Lock] = {}
_SLOT_LOCKS_GUARD = threading.Lock()


def find_slot(engine: Any, words: int = SLOT_WORDS) -> Any:
    """The engine's error slot, ``words`` int64s, found by calling its address function once."""
    getter = engine.raw_lookup(ERROR_ADDRESS_FN)
    if not getter:
        raise RuntimeError(f"compiled module has runtime checks but no {ERROR_ADDRESS_FN}")
    address = ctypes.c_int64(0)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(getter)((ctypes.c_void_p * 1)(ctypes.addressof(address)))
    if words not in (3, SLOT_WORDS):
        raise RuntimeError(f"compiled module's error slot has {words} words; this runtime reads 3 or {SLOT_WORDS}")
    return (ctypes.c_int64 * words).from_address(address.value)


def slot_lock(slot: Any) -> threading.Lock:
    """The lock every call that may record into ``slot`` holds from its start to the read of the slot."""
    address = ctypes.addressof(slot)
    with _SLOT_LOCKS_GUARD:
        return _SLOT_LOCKS.setdefault(address, threading.Lock())


#: A check message starting with this is a size check (match_cast, a result's sizes): it raises ValueError.
SHAPE_CHECK_PREFIX = "size: "
#: A check message starting with this is an allocation of compiled code that failed (``alloc_checks.py``); the rest
#: is where (``main: binding 'lv1'``, or nothing), the slot's value the byte count: it raises MemoryError.
MEMORY_CHECK_PREFIX = "memory: "


def take_error(slot: Any, messages: Sequence[str], function: str) -> Exception:
    """The error the slot holds (which is cleared for the next call): ``IndexError`` for an index check,
    ``ValueError`` for a size check, ``MemoryError`` for an allocation."""
    check, value, position = int(slot[0]), int(slot[1]), int(slot[2])
    extent = int(slot[3]) if len(slot) > 3 else "?"
    for i in range(len(slot)):
        slot[i] = 0
    if not 0 < check <= len(messages):
        return IndexError(f"{function}: a runtime check failed (check {check}, value {value})")
    if messages[check - 1].startswith(MEMORY_CHECK_PREFIX):
        return MemoryError(_out_of_memory(messages[check - 1][len(MEMORY_CHECK_PREFIX):], function, value))
    message = messages[check - 1].format(value=value, position=position, extent=extent)
    if message.startswith(SHAPE_CHECK_PREFIX):
        return ValueError(message[len(SHAPE_CHECK_PREFIX):])
    return IndexError(message)


def _out_of_memory(place: str, function: str, size: int) -> str:
    """The message of an allocation check: where (the binding, else the function called), how much."""
    where = place if place.startswith(f"{function}:") else f"{function}: {place}" if place else function
    amount = f"{size} bytes"
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size >= 2**shift:
            amount = f"{size / 2**shift:.1f} {unit} ({size} bytes)"
            break
    return f"{where}: unable to allocate {amount} in compiled code: out of memory; the call's results are discarded"
