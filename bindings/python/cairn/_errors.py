"""Cairn's exceptions: one class per error code of the C API (include/cairn/cairn.h).

Every exception Cairn raises is a :class:`Error`. Its ``code`` is the negative
``CAIRN_ERR_*`` value and ``message`` the detailed message (the same text as
``cairn::Status::message()`` / ``cairn_last_error()``).
"""

from __future__ import annotations

from typing import ClassVar, Dict, Optional, Type

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
    non-contiguous, not a buffer). ``CAIRN_ERR_INVALID_ARGUMENT`` (-1)."""

    default_code = -1


class ConfigError(Error, ValueError):
    """A bad configuration key, value or file. ``CAIRN_ERR_CONFIG`` (-2)."""

    default_code = -2


class NotFoundError(Error, LookupError):
    """No such name, version, step, region or key. ``CAIRN_ERR_NOT_FOUND`` (-3)."""

    default_code = -3


class CorruptError(Error):
    """A checkpoint file failed verification. ``CAIRN_ERR_CORRUPT`` (-4)."""

    default_code = -4


class IoError(Error):
    """An operating-system I/O error (the message has errno's text).
    ``CAIRN_ERR_IO`` (-5)."""

    default_code = -5


class NoSpaceError(IoError):
    """The file system is full or the quota exceeded. ``CAIRN_ERR_NO_SPACE`` (-6)."""

    default_code = -6


class SizeMismatchError(Error, ValueError):
    """A region's or buffer's size (or, for :meth:`Client.load`, shape or dtype)
    differs from the checkpoint's. ``CAIRN_ERR_SIZE_MISMATCH`` (-7)."""

    default_code = -7


class NoMemoryError(Error):
    """Allocating or mapping memory failed (the host cache). ``CAIRN_ERR_NO_MEMORY`` (-8)."""

    default_code = -8


class StateError(Error):
    """The call is not valid now (closed client or history, busy version).
    ``CAIRN_ERR_STATE`` (-9)."""

    default_code = -9


class UnsupportedError(Error):
    """Not available in this build (for example device memory while the GPU tier
    is missing). ``CAIRN_ERR_UNSUPPORTED`` (-10)."""

    default_code = -10


class ExistsError(Error):
    """The version or step already exists. ``CAIRN_ERR_EXISTS`` (-11)."""

    default_code = -11


class InternalError(Error):
    """A broken invariant inside Cairn (a bug). ``CAIRN_ERR_INTERNAL`` (-12)."""

    default_code = -12


_BY_CODE: Dict[int, Type[Error]] = {
    cls.default_code: cls
    for cls in (
        InvalidArgumentError,
        ConfigError,
        NotFoundError,
        CorruptError,
        IoError,
        NoSpaceError,
        SizeMismatchError,
        NoMemoryError,
        StateError,
        UnsupportedError,
        ExistsError,
        InternalError,
    )
}


def error_class(code: int) -> Type[Error]:
    """The exception class of a C error code (:class:`Error` for unknown codes)."""
    return _BY_CODE.get(code, Error)


def _from_status(code: int, message: str) -> Error:
    """Builds the exception for a failed C++ Status (called by the extension)."""
    return error_class(code)(message, code)
