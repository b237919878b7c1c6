"""Errors: classes and codes, bad arguments, bad memory, bad configuration."""

from __future__ import annotations

import pathlib
import re
from typing import Any, Callable

import numpy as np
import pytest

import cairn
from conftest import ROOT

CLASSES = {
    "INVALID_ARGUMENT": cairn.InvalidArgumentError,
    "CONFIG": cairn.ConfigError,
    "NOT_FOUND": cairn.NotFoundError,
    "CORRUPT": cairn.CorruptError,
    "IO": cairn.IoError,
    "NO_SPACE": cairn.NoSpaceError,
    "SIZE_MISMATCH": cairn.SizeMismatchError,
    "NO_MEMORY": cairn.NoMemoryError,
    "STATE": cairn.StateError,
    "UNSUPPORTED": cairn.UnsupportedError,
    "EXISTS": cairn.ExistsError,
    "INTERNAL": cairn.InternalError,
}


def test_codes_match_the_table() -> None:
    table = (ROOT / "include" / "cairn" / "cairn_errors.def").read_text()
    codes = dict(re.findall(r"^CAIRN_ERROR\(([A-Z_]+), \w+, (-\d+),", table, re.M))
    assert set(codes) == set(CLASSES)
    for name, cls in CLASSES.items():
        assert cls.default_code == int(codes[name]), name
        assert cairn.error_class(int(codes[name])) is cls
        assert issubclass(cls, cairn.Error)
    assert cairn.error_class(-99) is cairn.Error


def test_error_attributes() -> None:
    e = cairn.NotFoundError("no such thing")
    assert e.code == -3 and e.message == "no such thing" and str(e) == "no such thing"
    assert isinstance(e, LookupError)
    assert isinstance(cairn.ConfigError("x"), ValueError)
    assert isinstance(cairn.NoSpaceError("x"), cairn.IoError)


def test_restore_missing_version(client: cairn.Client) -> None:
    client.protect(0, np.zeros(10))
    with pytest.raises(cairn.NotFoundError) as e:
        client.restore("never", 4)
    assert e.value.code == -3
    assert "version 4 of 'never'" in e.value.message


def test_restore_wrong_size(client: cairn.Client) -> None:
    client.protect(0, np.zeros(10))
    client.checkpoint("sz", 0)
    client.protect(0, np.zeros(11))
    with pytest.raises(cairn.SizeMismatchError) as e:
        client.restore("sz", 0)
    assert e.value.code == -7


def test_checkpoint_twice_and_bad_names(client: cairn.Client) -> None:
    client.protect(0, np.zeros(10))
    client.checkpoint("dup", 0)
    with pytest.raises(cairn.ExistsError):
        client.checkpoint("dup", 0)
    for bad in ("", "a/b", "..", ".hidden", "x" * 129):
        with pytest.raises(cairn.InvalidArgumentError):
            client.checkpoint(bad, 1)
    with pytest.raises(cairn.InvalidArgumentError):
        client.checkpoint("neg", -1)


def test_read_only_rejected(client: cairn.Client) -> None:
    a = np.zeros(100)
    a.flags.writeable = False
    with pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        client.protect(0, a)
    with pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        client.protect(0, b"bytes are immutable")
    with pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        client.protect(0, memoryview(bytearray(4)).toreadonly())


def test_non_contiguous_rejected(client: cairn.Client) -> None:
    a = np.zeros((10, 10))
    with pytest.raises(cairn.InvalidArgumentError, match="not contiguous"):
        client.protect(0, a[:, ::2])
    with pytest.raises(cairn.InvalidArgumentError, match="not contiguous"):
        client.protect(0, a.T[::3])


def test_not_a_buffer_rejected(client: cairn.Client) -> None:
    with pytest.raises(cairn.InvalidArgumentError, match="got list"):
        client.protect(0, [1, 2, 3])  # type: ignore[arg-type]


def test_other_devices_unsupported(client: cairn.Client) -> None:
    class RocmTensor:  # CUDA (2) and CUDA managed (13) memory is taken; ROCm is not
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise AssertionError("must not be exported")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (10, 0)  # kDLROCM

    with pytest.raises(cairn.UnsupportedError, match="DLPack device type 10") as e:
        client.protect(0, RocmTensor())
    assert e.value.code == -10


class CudaArray:
    """A __cuda_array_interface__ exporter whose pointer is never used: every
    case below is refused by the binding before the core sees it."""

    def __init__(self, **cai: Any) -> None:
        self.cai = {"version": 3, "shape": (4, 4), "typestr": "<f4", "data": (0x10000, False), "strides": None}
        self.cai.update(cai)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.cai


@pytest.mark.parametrize(
    "cai, match",
    [
        ({"data": (0x10000, True)}, "read-only; Cairn needs writable memory"),
        ({"strides": (32, 8)}, "not contiguous"),
        ({"strides": (4, 4)}, "not contiguous"),
        ({"mask": object()}, "masked CUDA array"),
        ({"typestr": "<f"}, "unknown typestr '<f'"),
        ({"version": 4}, "version 4; Cairn reads versions 0 to 3"),
        ({"data": None}, "lacks data, shape or typestr"),
        ({"data": (0x10000,)}, "malformed __cuda_array_interface__"),
        ({"shape": ("a",)}, "malformed __cuda_array_interface__"),
        ({"shape": (-1, 4)}, "negative dimension"),
    ],
)
def test_bad_cuda_arrays_rejected(client: cairn.Client, cai: dict[str, Any], match: str) -> None:
    with pytest.raises(cairn.InvalidArgumentError, match=match):
        client.protect(0, CudaArray(**cai))


def test_cuda_array_interface_not_a_dict(client: cairn.Client) -> None:
    class Bad:
        __cuda_array_interface__ = [1, 2]

    with pytest.raises(cairn.InvalidArgumentError, match="is not a dict"):
        client.protect(0, Bad())  # type: ignore[arg-type]


def test_read_only_dlpack_rejected(client: cairn.Client) -> None:
    a = np.zeros(10)
    a.flags.writeable = False

    class Tensor:
        def __dlpack__(self, **kwargs: Any) -> Any:
            return a.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return a.__dlpack_device__()

    with pytest.raises(cairn.InvalidArgumentError, match="read-only"):
        client.protect(0, Tensor())


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"host_cach": "1GiB"}, "unknown configuration key 'host_cach' (did you mean 'host_cache'?)"),
        ({"bogus": 1}, "unknown configuration key 'bogus'"),
        ({"host_cache": "12XB"}, "host_cache: bad size '12XB'"),
        ({"host_cache": 1.5}, "host_cache must be a size"),
        ({"keep_versions": "2"}, "keep_versions must be an int"),
        ({"keep_versions": 0}, "keep_versions"),
        ({"direct_io": 1}, "direct_io must be a bool"),
        ({"block_size": 100_000}, "not a multiple of 4096"),
        ({"file_mode": "0680"}, "bad file mode"),
        ({"file_mode": 0o400}, "owner must be able to read and write"),
    ],
)
def test_bad_config(scratch: pathlib.Path, overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(cairn.ConfigError, match=re.escape(match)) as e:
        cairn.Client(scratch_dir=scratch, **overrides)
    assert e.value.code == -2


def test_bad_config_file(tmp_path: pathlib.Path) -> None:
    toml = tmp_path / "cairn.toml"
    toml.write_text("[host_cache]\nsise = '1GiB'\n")
    with pytest.raises(cairn.ConfigError, match="did you mean 'host_cache.size'"):
        cairn.Client(toml)
    with pytest.raises(cairn.ConfigError, match="cannot read config file"):
        cairn.Client(tmp_path / "missing.toml")


def test_closed_history_and_client(make_client: Callable[..., cairn.Client]) -> None:
    c = make_client()
    h = c.history("h")
    c.close()
    with pytest.raises(cairn.StateError):
        h.push(0, b"x")
    with pytest.raises(cairn.StateError):
        c.latest("h")
