"""TVM's virtual devices in the text format: ``R.Tensor(..., vdevice="llvm")`` and
``I.module_global_infos({"vdevice": [I.vdevice("llvm")]})``.

The backend runs on the host CPU only, TVM's ``llvm`` target, so a vdevice of that kind says nothing a program
here does not already mean: it is read, checked and not kept (the printer's text, without it, reads back to the
same module). Any other kind (``cuda``, ``opencl``, a memory scope other than ``global``) would place tensors
where this backend cannot, and is refused.
"""

from __future__ import annotations

from typing import Any

#: TVM's target kind of the host CPU, the one device this backend compiles for.
HOST_KIND = "llvm"


def target_kind(target: Any, where: str) -> str:
    """The kind of ``I.vdevice``'s target (``"llvm"``, ``"llvm -mcpu=..."`` or ``{"kind": "llvm", ...}``), which
    must be the host CPU's."""
    kind = target.get("kind") if isinstance(target, dict) else target.split()[0] if isinstance(target, str) \
        and target.strip() else None
    if kind != HOST_KIND:
        raise ValueError(f"{where}: target {target!r}: this backend runs on the host CPU only, TVM's "
                         f'"{HOST_KIND}" target; a vdevice\'s target must be "{HOST_KIND}"')
    return kind


def check_memory_scope(scope: Any, where: str) -> None:
    if scope != "global":
        raise ValueError(f'{where}: memory scope {scope!r}: only "global" (host memory) is supported')


def reference(value: Any, where: str) -> tuple[str, int]:
    """``(kind, index)`` of a tensor's ``vdevice="llvm"`` or ``"llvm:0"`` (the index-th device of that kind the
    module declares), refused unless the host CPU's."""
    if not isinstance(value, str):
        raise ValueError(f'{where}: vdevice must be a string naming a device ("{HOST_KIND}" or "{HOST_KIND}:0"), '
                         f"got {value!r} (TVM's order is R.Tensor(shape, dtype, vdevice, ndim): give ndim by "
                         "keyword)")
    kind, colon, index = value.partition(":")
    if colon and not (index.isdigit() and index.isascii()):
        raise ValueError(f'{where}: vdevice {value!r}: expected "kind" or "kind:index", e.g. "{HOST_KIND}:0"')
    if kind != HOST_KIND:
        raise ValueError(f"{where}: vdevice {value!r}: this backend runs on the host CPU only, TVM's "
                         f'"{HOST_KIND}" target; vdevice="{HOST_KIND}" (or none) is read')
    return kind, int(index) if colon else 0
