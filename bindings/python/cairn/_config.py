"""Keyword overrides of :class:`cairn.Client` mapped onto ``cairn::Config``.

The Python names follow the TOML keys of docs/config.md; sizes take an int
(bytes) or a size string such as ``"512MiB"``.
"""

from __future__ import annotations

import difflib
import os
from typing import Callable, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from . import _cairn
from ._enums import (
    CAPTURE_MODES,
    CHANGE_MODES,
    DEVICE_CACHE_INITS,
    INIT_STRATEGIES,
    L3_CODES,
    WRITE_PROTECT_MODES,
    CaptureMode,
    ChangeMode,
    DeviceCacheInit,
    InitStrategy,
    WriteProtectMode,
)
from ._errors import ConfigError

__all__ = [
    "CHANGE_MODES",
    "ChangeMode",
    "DEVICE_CACHE_INITS",
    "DeviceCacheInit",
    "INIT_STRATEGIES",
    "InitStrategy",
    "KEYS",
    "load",
    "to_dict",
]

PathArg = Union[str, "os.PathLike[str]"]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class _Key(NamedTuple):
    attr: str  # cairn::Config member
    toml: str  # docs/config.md key
    convert: Callable[[str, object], object]
    env: str  # the CAIRN_* variable, "" = none


def _type_name(value: object) -> str:
    return type(value).__name__


def _word(key: str, value: object) -> object:
    # A string value such as restart.placement's; the core names a bad one.
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a str, not {_type_name(value)}")
    return value


def _dir(key: str, value: object) -> object:
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{key} must be a path (str or os.PathLike), not {_type_name(value)}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise ConfigError(f"{key} must be a str path, not bytes")
    # Relative paths are made absolute, as for the file and the environment.
    return os.path.abspath(text) if text else ""


def _size(key: str, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(
            f"{key} must be a size: bytes as an int or a string like '512MiB', not {_type_name(value)}"
        )
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{key} must be a size >= 0, not {value}")
        return value
    try:
        return _cairn.parse_size(value)
    except ConfigError as e:
        raise ConfigError(f"{key}: {e.message}") from None


def _bool(key: str, value: object) -> object:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be a bool (True or False), not {_type_name(value)}")
    return value


def _int(key: str, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key} must be an int, not {_type_name(value)}")
    if not _INT_MIN <= value <= _INT_MAX:
        raise ConfigError(f"{key} is out of range: {value}")
    return value


def _one_of(names: Tuple[str, ...]) -> Callable[[str, object], object]:
    """The check of an enumerated key: `names` are its spellings (_enums.py)."""

    def check(key: str, value: object) -> object:
        if value not in names:
            raise ConfigError(f"{key} must be one of {', '.join(names)}, not {value!r}")
        return value

    return check


_init = _one_of(INIT_STRATEGIES)
_device_init = _one_of(DEVICE_CACHE_INITS)
_changes = _one_of(CHANGE_MODES)
_capture = _one_of(CAPTURE_MODES)
_write_protect = _one_of(WRITE_PROTECT_MODES)
_l3_code = _one_of(L3_CODES)


def _number(key: str, value: object) -> object:
    # The range is the key's own (cow_fraction 0 to 1, mtbf_s >= 0): checked,
    # with the key named, by Config.validate() in load().
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key} must be a number, not {_type_name(value)}")
    return float(value)


def _mode(key: str, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(
            f"{key} must be permission bits as an int (0o640) or an octal string ('0640'), "
            f"not {_type_name(value)}"
        )
    if isinstance(value, str):
        digits = value[2:] if value[:2].lower() == "0o" else value
        if not digits or any(c not in "01234567" for c in digits):
            raise ConfigError(f"{key}: bad file mode {value!r}: expected octal digits like '0600'")
        value = int(digits, 8)
    if not 0 <= value <= 0o7777:
        raise ConfigError(f"{key}: bad file mode {oct(value)}: more than 0o7777")
    return value


_CONVERT: Dict[str, Callable[[str, object], object]] = {
    "path": _dir,
    "word": _word,
    "bool": _bool,
    "int": _int,
    "size": _size,
    "mode": _mode,
    "init": _init,
    "device_init": _device_init,
    "changes": _changes,
    "capture": _capture,
    "write_protect": _write_protect,
    "l3_code": _l3_code,
    "number": _number,
}

#: Keyword overrides accepted by :class:`cairn.Client`, by Python name: the
#: rows of include/cairn/config_keys.def (docs/config.md), the one list of keys.
KEYS: Dict[str, _Key] = {
    py: _Key(attr, toml, _CONVERT[kind], env) for py, attr, toml, env, kind in _cairn.config_keys()
}


def load(path: Optional[PathArg], overrides: Mapping[str, object]) -> _cairn.Config:
    """Builds a validated config: defaults, the TOML file at ``path`` (None:
    ``$CAIRN_CONFIG`` or none), ``CAIRN_*`` variables, then ``overrides``.

    Raises:
        ConfigError: unknown key, bad type or value, or a file problem.
    """
    for key in overrides:
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"unknown configuration key '{key}'{hint}; known keys: {', '.join(KEYS)}"
            )
    file = None
    if path is not None:
        file = os.fspath(path)
        if not isinstance(file, str):
            raise ConfigError("config must be a str path, not bytes")
    config = _cairn.load_config(file)
    for key, value in overrides.items():
        spec = KEYS[key]
        setattr(config, spec.attr, spec.convert(key, value))
    config.validate()
    return config


def to_dict(config: _cairn.Config) -> Dict[str, object]:
    """The configuration as a dict keyed by the Python names of :data:`KEYS`."""
    return {key: getattr(config, spec.attr) for key, spec in KEYS.items()}
