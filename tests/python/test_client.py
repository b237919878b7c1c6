"""Client: protect / checkpoint / wait / latest / restore round trips."""

from __future__ import annotations

import array
import pathlib
import re
from typing import Any, Callable

import numpy as np
import pytest

import cairn
from cairn import _cairn


@pytest.mark.parametrize(
    "dtype", ["uint8", "int16", "int32", "int64", "float16", "float32", "float64", "complex128", "bool"]
)
@pytest.mark.parametrize("shape", [(0,), (1,), (1000,), (33, 77), (4, 5, 6), (3 << 18,)])
def test_numpy_round_trip(client: cairn.Client, dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    a = (rng.random(shape) * 100).astype(dtype)
    want = a.copy()
    client.protect(7, a)
    client.checkpoint("np", 1)
    a[...] = 0
    client.restore("np", 1)
    np.testing.assert_array_equal(a, want)


def test_several_regions_and_files(make_client: Callable[..., cairn.Client]) -> None:
    """Regions of different kinds; restore in a second client reads the files."""
    x = np.linspace(0.0, 1.0, 100_000)
    b = bytearray(b"cairn" * 1000)
    raw = bytearray(range(256)) * 50
    m = memoryview(raw)
    ints = array.array("i", range(1000))
    regions: list[Any] = [x, b, m, ints]
    with make_client() as c:
        for rid, obj in enumerate(regions):
            c.protect(rid, obj)
        c.checkpoint("mixed", 3)
        c.wait("mixed", 3, "local")
    want = (x.copy(), bytes(b), bytes(raw), ints.tolist())
    x[:] = 0
    b[:] = bytes(len(b))
    raw[:] = bytes(len(raw))
    ints[:] = array.array("i", bytes(4000))
    with make_client() as c:  # a new client: not in its cache, read from the file
        assert c.latest("mixed") == 3
        for rid, obj in enumerate(regions):
            c.protect(rid, obj)
        c.restore("mixed", 3)
        assert c.stats().cache_misses == 1
    np.testing.assert_array_equal(x, want[0])
    assert (bytes(b), bytes(raw), ints.tolist()) == want[1:]


def test_fortran_order_and_multiple_versions(client: cairn.Client) -> None:
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    client.protect(0, a)
    for v in range(3):
        a += 1
        client.checkpoint("f", v)
    client.restore("f", 1)
    np.testing.assert_array_equal(a, np.arange(12.0).reshape(3, 4) + 2)


def test_dlpack_only_object(client: cairn.Client) -> None:
    """An object that offers DLPack but no buffer protocol (like a torch tensor)."""

    class Tensor:
        def __init__(self, a: np.ndarray[Any, Any]) -> None:
            self.a = a

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.a.__dlpack_device__()

    a = np.arange(1000, dtype=np.float32)
    client.protect(0, Tensor(a))
    client.checkpoint("dl", 0)
    a[:] = -1
    client.restore("dl", 0)
    np.testing.assert_array_equal(a, np.arange(1000, dtype=np.float32))


def test_reprotect_and_unprotect(client: cairn.Client) -> None:
    a, b = np.ones(10), np.full(20, 2.0)
    client.protect(0, a)
    client.protect(0, b)  # replaces a
    client.checkpoint("re", 0)
    b[:] = 0
    client.restore("re", 0)
    assert (b == 2.0).all()
    client.unprotect(0)
    with pytest.raises(cairn.NotFoundError) as e:
        client.unprotect(0)
    assert e.value.code == -3


def test_protect_keeps_the_object_alive(client: cairn.Client) -> None:
    client.protect(0, np.full(1 << 16, 3.0))  # no other reference
    client.checkpoint("alive", 0)
    out = np.zeros(1 << 16)
    client.unprotect(0)
    client.protect(0, out)
    client.restore("alive", 0)
    assert (out == 3.0).all()


def test_protected_bytearray_cannot_be_resized(client: cairn.Client) -> None:
    b = bytearray(100)
    client.protect(0, b)
    with pytest.raises(BufferError):
        b.extend(b"x")
    client.unprotect(0)
    b.extend(b"x")


def test_latest(client: cairn.Client) -> None:
    assert client.latest("none") is None
    a = np.zeros(10)
    client.protect(0, a)
    for v in (1, 5, 3):
        client.checkpoint("lat", v)
        client.wait("lat", v)
    assert client.latest("lat") == 5


def test_restoring_counts_as_a_restore_until_it_ends(client: cairn.Client) -> None:
    assert client.stats().init.restores_now == 0
    with client.restoring():
        assert client.stats().init.restores_now == 1
        client.begin_restore()
        assert client.stats().init.restores_now == 2
        client.end_restore()
    assert client.stats().init.restores_now == 0
    with pytest.raises(cairn.StateError, match="no restore begun"):
        client.end_restore()
    with pytest.raises(RuntimeError), client.restoring():
        raise RuntimeError("the load failed")
    assert client.stats().init.restores_now == 0, "the with block ends it on an exception too"


def test_wait_levels(client: cairn.Client) -> None:
    client.protect(0, np.zeros(1000))
    client.checkpoint("lv", 0)
    client.wait("lv", 0, "cache")
    client.wait("lv", 0, cairn.Level.LOCAL)
    with pytest.raises(cairn.InvalidArgumentError):
        client.wait("lv", 0, "persistent")  # no persistent directory
    with pytest.raises(cairn.InvalidArgumentError):
        client.wait("lv", 0, "disk")


def test_persistent_tier(make_client: Callable[..., cairn.Client], tmp_path: pathlib.Path) -> None:
    with make_client(persistent_dir=tmp_path / "persistent") as c:
        c.protect(0, np.arange(100.0))
        c.checkpoint("p", 0)
        c.wait("p", 0, "persistent")
        assert c.stats().flush_persistent.ops == 1
    assert (tmp_path / "persistent" / "p" / f"v{0:020d}.cairn").exists()


def test_stats(client: cairn.Client) -> None:
    a = np.zeros(1 << 20, np.uint8)
    client.protect(0, a)
    client.checkpoint("s", 0)
    client.wait("s", 0)
    client.restore("s", 0)
    st = client.stats()
    assert st.capture.bytes == 1 << 20 and st.capture.ops == 1
    assert st.flush_local.bytes == 1 << 20
    assert st.cache_hits == 1 and st.hit_ratio == 1.0
    assert st.cache_capacity_bytes == 32 << 20
    assert st.as_dict()["capture"]["bytes"] == 1 << 20
    init = st.init
    assert init.strategy == "adaptive"  # the default
    assert (
        init.capture_untouched_bytes + init.capture_touched_bytes + init.capture_pinned_bytes
        == st.capture.bytes
    )
    assert init.pinned_s is None and init.pin_error == ""  # pin is off by default


def test_stats_have_every_field_of_the_table_under_its_name(client: cairn.Client) -> None:
    # include/cairn/cairn_stats.def is the one list of statistics: cairn.Stats
    # has each of its fields, at the path its name spells (init_pinned_s is
    # stats.init.pinned_s), and nothing else.
    def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, prefix + k + "_") if isinstance(v, dict) else {prefix + k: v})
        return out

    st = client.stats()
    flat = flatten(st.as_dict())
    table = {name: kind for name, kind, _doc in _cairn.stats_fields()}
    assert set(flat) == set(table)
    assert all(isinstance(flat[n], bool) for n, k in table.items() if k == "FLAG")
    assert all(isinstance(flat[n], str) for n, k in table.items() if k in ("TEXT", "ENUM"))
    assert st.capture_blocked_seconds == st.capture_blocked_s  # the documented old name


def test_device_stats_without_gpu_use(client: cairn.Client) -> None:
    a = np.ones(1000)
    client.protect(0, a)
    client.checkpoint("host", 0)
    dev = client.stats().device
    assert isinstance(dev, cairn.DeviceStats)
    assert dev.init == "incremental"  # the default
    assert dev.capacity_bytes == dev.mapped_bytes == dev.used_bytes == 0  # no device cache
    assert dev.fully_mapped_s is None and dev.map_error == ""
    assert dev.capture == dev.drain == dev.prefetch == cairn.TierStats(0, 0, 0.0)
    assert dev.hits == dev.evictions == dev.bounce_bytes == 0
    assert client.stats().as_dict()["device"]["capture"]["bytes"] == 0


def test_device_cache_keywords(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with cairn.Client(
        scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", device_cache="64MiB",
        device_cache_init="direct", device_map_chunk=2 << 20, device=0, bounce_buffers=4,
        # The device cache is used only with a GPU, so no GPU is needed to open.
    ) as c:
        cfg = c.config
        assert cfg["device_cache"] == 64 << 20
        assert cfg["device_cache_init"] == "direct"
        assert cfg["device_map_chunk"] == 2 << 20
        assert cfg["device"] == 0 and cfg["bounce_buffers"] == 4
    monkeypatch.setenv("CAIRN_DEVICE_CACHE", "32MiB")
    monkeypatch.setenv("CAIRN_DEVICE_CACHE_INIT", "direct")
    monkeypatch.setenv("CAIRN_DEVICE", "2")
    with cairn.Client(scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", device=0) as c:
        cfg = c.config
        assert cfg["device_cache"] == 32 << 20 and cfg["device_cache_init"] == "direct"
        assert cfg["device"] == 0  # keywords win over the environment
        assert cfg["device_map_chunk"] == 1 << 30 and cfg["bounce_buffers"] == 2  # defaults


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"device_cache_init": "lazy"}, "device_cache_init must be one of direct, incremental"),
        ({"device_cache": "lots"}, "device_cache: bad size 'lots'"),
        ({"device_cache": 4096}, "device_cache.size"),
        ({"device_map_chunk": 0}, "device_cache.map_chunk"),
        ({"device": -2}, "device_cache.device"),
        ({"device": "0"}, "device must be an int"),
        ({"bounce_buffers": 0}, "device_cache.bounce_buffers"),
        ({"bounce_buffers": 65}, "device_cache.bounce_buffers"),
        ({"device_cach": "1GiB"}, "did you mean 'device_cache'"),
    ],
)
def test_bad_device_cache_keywords(
    tmp_path: pathlib.Path, overrides: dict[str, Any], match: str
) -> None:
    with pytest.raises(cairn.ConfigError, match=re.escape(match)):
        cairn.Client(scratch_dir=tmp_path, **overrides)


def test_cache_init_keywords(tmp_path: pathlib.Path) -> None:
    with cairn.Client(
        scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", init="eager", pin=True,
        pin_lock=tmp_path / "pin.lock",
    ) as c:
        st = c.stats()
        assert st.init.strategy == "eager"
        assert st.init.fully_touched_s is not None  # populated at open
        assert st.init.pinned_s is not None or st.init.pin_error
    with pytest.raises(cairn.ConfigError, match="init must be one of"):
        cairn.Client(scratch_dir=tmp_path, init="fast")  # type: ignore[arg-type]


def test_config_and_overrides(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "cairn.toml"
    toml.write_text(
        f'[storage]\nscratch = "{tmp_path / "from-file"}"\n[host_cache]\nsize = "16MiB"\n'
        "[retention]\nkeep_versions = 3\n"
    )
    monkeypatch.setenv("CAIRN_KEEP", "4")
    with cairn.Client(toml, block_size=64 << 10, file_mode="0640") as c:
        cfg = c.config
        assert cfg["scratch_dir"] == str(tmp_path / "from-file")
        assert cfg["host_cache"] == 16 << 20  # file
        assert cfg["keep_versions"] == 4  # environment wins over the file
        assert cfg["block_size"] == 64 << 10  # keywords win over both
        assert cfg["file_mode"] == 0o640
    monkeypatch.chdir(tmp_path)
    with cairn.Client(scratch_dir="rel", host_cache="8MiB", keep_versions=1) as c:
        assert c.config["scratch_dir"] == str(tmp_path / "rel")  # made absolute
        assert c.config["keep_versions"] == 1


def test_context_manager_closes(scratch: pathlib.Path) -> None:
    with cairn.Client(scratch_dir=scratch, host_cache="8MiB", block_size="1MiB") as c:
        c.protect(0, bytearray(10))
        assert not c.closed
    assert c.closed
    with pytest.raises(cairn.StateError) as e:
        c.checkpoint("x", 0)
    assert e.value.code == -9
    c.close()  # idempotent


def test_close_drains_pending_flushes(scratch: pathlib.Path) -> None:
    c = cairn.Client(scratch_dir=scratch, host_cache="64MiB")
    c.protect(0, np.ones(4 << 20))  # 32 MiB
    c.checkpoint("drain", 9)
    c.close()
    assert (scratch / "drain" / f"v{9:020d}.cairn").exists()


def test_size_helpers() -> None:
    assert cairn.parse_size("512MiB") == 512 << 20
    assert cairn.parse_size("100MB") == 100_000_000
    assert cairn.format_size(512 << 20) == "512 MiB"
    with pytest.raises(cairn.ConfigError):
        cairn.parse_size("lots")


def test_checkpoint_due(scratch: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """checkpoint_due: needs an MTBF; due first, then not within the optimal
    interval (an MTBF of 1e15 s puts it at >= 1400 s for any measured cost);
    the stats show the decision."""
    with cairn.Client(scratch_dir=scratch, host_cache="8MiB", block_size="1MiB") as c:
        with pytest.raises(cairn.ConfigError, match=re.escape("checkpoint.mtbf_s (CAIRN_MTBF) is not set")):
            c.checkpoint_due("x")
    with cairn.Client(scratch_dir=scratch, host_cache="8MiB", block_size="1MiB", mtbf_s=1e15) as c:
        assert c.config["mtbf_s"] == 1e15
        a = np.ones(1 << 16)
        c.protect(0, a)
        assert c.checkpoint_due("x") is True
        assert c.stats().interval == cairn.IntervalStats(0.0, 0.0, 0.0, 0.0)
        c.checkpoint("x", 1)
        assert c.checkpoint_due("x") is False
        iv = c.stats().interval
        assert iv.checkpoint_s > 0 and iv.period_s >= 1400
        assert iv.restore_s == (8 << 16) / 1e9  # estimated: 512 KiB at 1 GB/s
        assert 0 < iv.waste < 1e-3
    monkeypatch.setenv("CAIRN_MTBF", "7200")
    with cairn.Client(scratch_dir=scratch, host_cache="8MiB", block_size="1MiB") as c:
        assert c.config["mtbf_s"] == 7200
    for bad, match in ((-1, "checkpoint.mtbf_s (CAIRN_MTBF) is -1"), ("1h", "mtbf_s must be a number, not str")):
        with pytest.raises(cairn.ConfigError, match=re.escape(match)):
            cairn.Client(scratch_dir=scratch, mtbf_s=bad)  # type: ignore[arg-type]
