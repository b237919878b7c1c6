"""Cairn's exceptions: one class per error code of the C API (include/cairn/cairn.h).

Every exception Cairn raises is a :class:`Error`. Its ``code`` is the negative
``CAIRN_ERR_*`` value and ``message`` the detailed message (the same text as
``cairn::Status::message()`` / ``cairn_last_error()``).
"""

from __future__ import annotations

from typing import ClassVar, Dict, Optional, Type

from . import _cairn

__all__ = [
    "Error",
    "InvalidArgumentError",
    "ConfigError",
    "NotFoundError",
    "CorruptError",
    "IoError",
    "NoSpaceError",
    "SizeMismatchError",
    "NoMemoryError",
    "StateError",
    "UnsupportedError",
    "ExistsError",
    "InternalError",
]


class Error(Exception):
    """Base class of every Cairn error.

    Attributes:
        code: the C API error code (a negative ``CAIRN_ERR_*`` value).
        message: the detailed message.
    """

    #: The error code of this class (the base class has none of its own).
    default_code: ClassVar[int] = 0

    code: int
    message: str

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"


class InvalidArgumentError(Error, ValueError):
    """A bad argument: name, size, level, or memory Cairn cannot use (read-only,
    non-contiguous, not a buffer). ``CAIRN_ERR_INVALID_ARGUMENT``."""


class ConfigError(Error, ValueError):
    """A bad configuration key, value or file. ``CAIRN_ERR_CONFIG``."""


class NotFoundError(Error, LookupError):
    """No such name, version, step, region or key. ``CAIRN_ERR_NOT_FOUND``."""


class CorruptError(Error):
    """A checkpoint file failed verification. ``CAIRN_ERR_CORRUPT``."""


class IoError(Error):
    """An operating-system I/O error (the message has errno's text).
    ``CAIRN_ERR_IO``."""


class NoSpaceError(IoError):
    """The file system is full or the quota exceeded. ``CAIRN_ERR_NO_SPACE``."""


class SizeMismatchError(Error, ValueError):
    """A region's or buffer's size (or, for :meth:`Client.load`, shape or dtype)
    differs from the checkpoint's. ``CAIRN_ERR_SIZE_MISMATCH``."""


class NoMemoryError(Error):
    """Allocating or mapping memory failed (the host cache). ``CAIRN_ERR_NO_MEMORY``."""


class StateError(Error):
    """The call is not valid now (closed client or history, busy version).
    ``CAIRN_ERR_STATE``."""


class UnsupportedError(Error):
    """Not available in this build (for example device memory while the GPU tier
    is missing). ``CAIRN_ERR_UNSUPPORTED``."""


class ExistsError(Error):
    """The version or step already exists. ``CAIRN_ERR_EXISTS``."""


class InternalError(Error):
    """A broken invariant inside Cairn (a bug). ``CAIRN_ERR_INTERNAL``."""


def _by_code() -> Dict[int, Type[Error]]:
    """Each class's code, from the one table of codes (include/cairn/cairn_errors.def)."""
    by_code: Dict[int, Type[Error]] = {}
    for code, c_name, class_name in _cairn.error_codes():
        cls = globals().get(class_name)
        if not (isinstance(cls, type) and issubclass(cls, Error)) or class_name not in __all__:
            raise ImportError(f"cairn._errors has no exception class {class_name} for {c_name}")
        cls.default_code = code
        by_code[code] = cls
    return by_code


_BY_CODE: Dict[int, Type[Error]] = _by_code()


def error_class(code: int) -> Type[Error]:
    """The exception class of a C error code (:class:`Error` for unknown codes)."""
    return _BY_CODE.get(code, Error)


def _from_status(code: int, message: str) -> Error:
    """Builds the exception for a failed C++ Status (called by the extension)."""
    return error_class(code)(message, code)
