"""cairn.Stats from the extension's flat dict of statistics (_stats.py).

Field f of a class is d[prefix + f]; a nested class's fields carry its field
name as a further prefix (Stats.init.pinned_s = d["init_pinned_s"]). Each value
is converted by its kind in include/cairn/cairn_stats.def.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Dict, Mapping, Optional, Set, Tuple, Type, TypeVar, Union

from . import _cairn, _config
from ._errors import InternalError

_T = TypeVar("_T")

# The names of the enum fields' values.
_ENUM_NAMES: Dict[str, Tuple[str, ...]] = {
    "init_strategy": _config.INIT_STRATEGIES,
    "device_init": _config.DEVICE_CACHE_INITS,
}
_KINDS: Dict[str, str] = {name: kind for name, kind, _doc in _cairn.stats_fields()}


def build_stats(cls: Type[_T], d: Mapping[str, Union[int, float, str]], nested: Mapping[str, type]) -> _T:
    """cls (Stats) from the flat dict; InternalError naming any field no class has."""
    used: Set[str] = set()
    stats = _build(cls, d, "", used, nested)
    unused = sorted(set(d) - used)
    if unused:
        raise InternalError(f"cairn.Stats has no attribute for the statistics {unused}")
    return stats


def _build(
    cls: Type[_T], d: Mapping[str, Union[int, float, str]], prefix: str, used: Set[str], nested: Mapping[str, type]
) -> _T:
    values: Dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        key = prefix + f.name
        inner = nested.get(str(f.type))
        if inner is not None:
            values[f.name] = _build(inner, d, key + "_", used, nested)
            continue
        value, kind = d[key], _KINDS[key]
        used.add(key)
        if kind == "WHEN":
            values[f.name] = _when(value)
        elif kind == "ENUM":
            values[f.name] = _ENUM_NAMES[key][int(value)]
        elif kind in ("F64", "RATIO"):
            values[f.name] = float(value)
        elif kind == "U64":
            values[f.name] = int(value)
        else:  # FLAG (a bool already) or TEXT
            values[f.name] = value
    return cls(**values)


def _when(seconds: Union[int, float, str]) -> Optional[float]:
    """A time since open, or None for "not yet" (< 0 in C++)."""
    value = float(seconds)
    return None if value < 0 else value
