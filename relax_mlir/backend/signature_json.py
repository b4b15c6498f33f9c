"""``FunctionSignature`` to JSON-ready data and back, for compiled libraries read without MLIR.

    data = signature_to_json(sig)      # {"name": "main", "params": [{"shape": ["n", 784], "dtype": "float32",
                                       #   "name": "x"}, ...], "results": [...]}
    sig == signature_from_json(data)   # True

A dimension stays what it is in the signature: an int, a symbol or an expression (a str). Malformed data raises
ValueError naming the function and the field.
"""

from __future__ import annotations

from typing import Any

from .signature import FunctionSignature, TensorSpec


def _spec_to_json(spec: TensorSpec) -> dict[str, Any]:
    return {"shape": list(spec.shape), "dtype": spec.dtype.name, "name": spec.name}


def signature_to_json(sig: FunctionSignature) -> dict[str, Any]:
    """The signature as plain dicts, lists, strs and ints."""
    data = {"name": sig.name, "params": [_spec_to_json(p) for p in sig.params],
            "results": [_spec_to_json(r) for r in sig.results]}
    if sig.scratch:  # (libraries written before it have none: their calls are not checked)
        data["scratch"] = [_spec_to_json(t) for t in sig.scratch]
    return data


def _spec_from_json(data: Any, where: str) -> TensorSpec:
    if not isinstance(data, dict) or not isinstance(data.get("shape"), list) or not isinstance(data.get("dtype"), str):
        raise ValueError(f"{where}: expected {{'shape': [...], 'dtype': str, 'name': str}}, got {data!r}")
    try:
        return TensorSpec(tuple(data["shape"]), data["dtype"], str(data.get("name", "")))
    except TypeError as exc:  # an unknown dtype name
        raise ValueError(f"{where}: {exc}") from None


def signature_from_json(data: Any) -> FunctionSignature:
    """The signature :func:`signature_to_json` wrote (checked as any signature is)."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError(f"signature: expected a dict with a 'name', got {type(data).__name__}")
    name = data["name"]
    specs = {}
    for field in ("params", "results", "scratch"):
        items = data.get(field, [] if field == "scratch" else None)
        if not isinstance(items, list):
            raise ValueError(f"signature {name!r}: {field!r} must be a list, got {type(items).__name__}")
        specs[field] = tuple(_spec_from_json(x, f"signature {name!r}: {field}[{i}]") for i, x in enumerate(items))
    return FunctionSignature(name, specs["params"], specs["results"], specs["scratch"])
