"""Client.save / Client.load: mappings of arrays (state dicts)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict

import numpy as np
import pytest

import cairn


def test_describe_cuda_arrays() -> None:
    """dtype names of CUDA arrays without .dtype come from the typestr, numpy's way."""
    from cairn import _state

    class CudaArray:
        def __init__(self, typestr: str, shape: tuple[int, ...]) -> None:
            self.__cuda_array_interface__ = {
                "version": 3, "shape": shape, "typestr": typestr, "data": (0x1000, False)
            }

    assert _state.describe(CudaArray("<f4", (3, 4))) == ("float32", (3, 4), 48)
    assert _state.describe(CudaArray("<i8", (5,))) == ("int64", (5,), 40)
    assert _state.describe(CudaArray("|u1", ())) == ("uint8", (), 1)
    assert _state.describe(CudaArray("|b1", (2,))) == ("bool", (2,), 2)
    assert _state.describe(CudaArray("<c16", (1,))) == ("complex128", (1,), 16)
    assert _state.describe(CudaArray("<f2", (2, 0))) == ("float16", (2, 0), 0)
    for typestr in ("<f4", "<i8", "|u1", "|b1", "<c16"):
        assert _state.describe(CudaArray(typestr, (1,)))[0] == str(np.dtype(typestr))
    with pytest.raises(cairn.InvalidArgumentError, match="malformed"):
        _state.describe(CudaArray("<fx", (1,)))


def state() -> Dict[str, Any]:
    rng = np.random.default_rng(3)
    return {
        "encoder.weight": rng.standard_normal((64, 32)).astype(np.float32),
        "encoder.bias": rng.standard_normal(32).astype(np.float32),
        "step": np.array([1234], np.int64),
        "mask": rng.random((7, 9)) > 0.5,
        "blob": bytearray(b"opaque bytes"),
    }


def zeros_like(s: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (bytearray(len(v)) if isinstance(v, bytearray) else np.zeros_like(v)) for k, v in s.items()}


def assert_equal(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)


def test_save_load_round_trip(make_client: Callable[..., cairn.Client]) -> None:
    s = state()
    with make_client() as c:
        c.save("model", 10, s)
        into = zeros_like(s)
        c.load("model", 10, into)  # from the cache
        assert_equal(into, s)
        c.wait("model", 10)
    with make_client() as c:  # from the file
        assert c.latest("model") == 10
        into = zeros_like(s)
        c.load("model", 10, into)
        assert_equal(into, s)


def test_load_needs_no_cache_and_reads_shared_versions_too(make_client: Callable[..., cairn.Client]) -> None:
    """A load restores into fresh memory (48 MiB here): the cache keeps its
    size (it grows for what save captures). shared_on_node reads through the page cache,
    with the same result."""
    s: Dict[str, Any] = {"big": np.arange(6 << 20, dtype=np.int64), "small": np.arange(10, dtype=np.float32)}
    with make_client() as c:
        c.save("model", 1, s)
        assert c.stats().cache_capacity_bytes > 32 << 20
    with make_client() as c:
        for shared in (False, True):
            into = zeros_like(s)
            c.load("model", 1, into, shared_on_node=shared)
            assert_equal(into, s)
            assert c.stats().cache_capacity_bytes == 32 << 20


def test_read_only_arrays_can_be_saved(client: cairn.Client) -> None:
    a = np.arange(10.0)
    a.flags.writeable = False
    client.save("ro", 0, {"a": a, "b": b"bytes too"})
    into: Dict[str, Any] = {"a": np.zeros(10), "b": bytearray(9)}
    client.load("ro", 0, into)
    assert into["b"] == b"bytes too" and (into["a"] == a).all()


def test_wrong_shapes_and_dtypes(client: cairn.Client) -> None:
    s = state()
    client.save("m", 0, s)
    into = zeros_like(s)
    into["encoder.weight"] = np.zeros((32, 64), np.float32)  # same bytes, other shape
    into["step"] = np.zeros(1, np.int32)
    with pytest.raises(cairn.SizeMismatchError) as e:
        client.load("m", 0, into)
    msg = e.value.message
    assert "'encoder.weight': checkpoint has float32[64, 32], `into` has float32[32, 64]" in msg
    assert "'step': checkpoint has int64[1], `into` has int32[1]" in msg
    assert not into["encoder.bias"].any()  # nothing was copied


def test_missing_and_extra_keys(client: cairn.Client) -> None:
    s = state()
    client.save("k", 0, s)
    into = zeros_like(s)
    into["new.weight"] = np.zeros(3)
    with pytest.raises(cairn.NotFoundError, match="not in the checkpoint: 'new.weight'"):
        client.load("k", 0, into)
    partial = {"step": np.zeros(1, np.int64)}
    with pytest.raises(cairn.NotFoundError, match="strict=False"):
        client.load("k", 0, partial)
    client.load("k", 0, partial, strict=False)
    assert partial["step"][0] == 1234


def test_ids_are_stable_and_manifest_is_stored(client: cairn.Client) -> None:
    """Keys get ids in sorted order; the manifest (region 1) names them."""
    client.save("ids", 0, {"b": np.zeros(2), "a": np.ones(3, np.float32)})
    head = bytearray(16)
    client.protect(0, head)
    client.restore("ids", 0)
    size = int.from_bytes(head[8:], "little")
    assert head[:8] == b"CAIRNPY1"
    manifest = bytearray(size)
    client.protect(1, manifest)
    client.restore("ids", 0)
    doc = json.loads(manifest)
    assert [(a["key"], a["id"], a["dtype"], a["shape"]) for a in doc["arrays"]] == [
        ("a", 2, "float32", [3]),
        ("b", 3, "float64", [2]),
    ]


def test_load_of_a_plain_checkpoint(client: cairn.Client) -> None:
    client.protect(5, np.zeros(10))
    client.checkpoint("plain", 0)
    client.unprotect(5)
    with pytest.raises(cairn.InvalidArgumentError, match="not written by Client.save"):
        client.load("plain", 0, {"x": np.zeros(10)})
    with pytest.raises(cairn.NotFoundError, match="version 1 of 'plain'"):
        client.load("plain", 1, {"x": np.zeros(10)})


def test_protected_regions_are_left_alone(client: cairn.Client) -> None:
    """save/load set protect()ed regions aside and register them again."""
    raw = np.full(100, 7.0)
    client.protect(0, raw)
    client.protect(2, bytearray(5))
    client.save("both", 0, {"a": np.ones(3)})
    into = {"a": np.zeros(3)}
    client.load("both", 0, into)
    assert (into["a"] == 1).all()
    client.checkpoint("raw", 0)  # still exactly the protected regions
    raw[:] = 0
    client.restore("raw", 0)
    assert (raw == 7.0).all()
    with pytest.raises(cairn.SizeMismatchError, match="region 0"):
        client.restore("both", 0)  # its region 0 is save()'s 16-byte header
    client.unprotect(0)
    client.unprotect(2)
    with pytest.raises(cairn.InvalidArgumentError, match="keys must be str"):
        client.save("x", 0, {1: np.zeros(1)})  # type: ignore[dict-item]


def test_torch_state_dict(client: cairn.Client) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = model.state_dict()
    client.save("torch", 1, sd)
    other = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    into = other.state_dict()
    client.load("torch", 1, into)
    for k in sd:
        assert torch.equal(sd[k], into[k])
    # torch tensors and numpy arrays are interchangeable
    as_numpy = {k: np.zeros(tuple(v.shape), np.float32) for k, v in sd.items()}
    client.load("torch", 1, as_numpy)
    np.testing.assert_array_equal(as_numpy["0.weight"], sd["0.weight"].numpy())


def test_torch_tensors(client: cairn.Client) -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, dtype=torch.float64)
    client.protect(0, t)
    client.checkpoint("t", 0)
    t.zero_()
    client.restore("t", 0)
    assert torch.equal(t, torch.arange(1000, dtype=torch.float64))
    with pytest.raises(cairn.InvalidArgumentError, match="not contiguous"):
        client.protect(1, torch.zeros(10, 10)[:, ::2])
    client.protect(1, torch.zeros(10, 10).t())  # column-major is contiguous memory
    if torch.cuda.is_available():
        with pytest.raises(cairn.UnsupportedError):
            client.protect(2, torch.zeros(10, device="cuda"))


def test_load_without_into_returns_new_arrays(make_client: Callable[..., cairn.Client]) -> None:
    """load(name, version) makes numpy arrays of the saved dtypes and shapes."""
    s = state()
    s["scalar"] = np.array(2.5)  # 0-d
    s["empty"] = np.zeros((0, 3), np.int16)
    with make_client() as c:
        c.save("model", 3, s)
        got = c.load("model", 3)  # from the cache
        c.wait("model", 3)
    with make_client() as c:  # from the file
        again = c.load("model", 3)
    for loaded in (got, again):
        assert list(loaded) == sorted(s)
        for k, v in s.items():
            expect = np.frombuffer(v, np.uint8) if isinstance(v, bytearray) else v
            assert loaded[k].dtype == expect.dtype and loaded[k].shape == expect.shape, k
            assert loaded[k].flags.writeable and loaded[k].flags.c_contiguous, k
            np.testing.assert_array_equal(loaded[k], expect, err_msg=k)
    assert got["encoder.weight"] is not s["encoder.weight"]


def test_load_into_returns_into(client: cairn.Client) -> None:
    s = state()
    client.save("m", 0, s)
    into = zeros_like(s)
    assert client.load("m", 0, into) is into
    assert_equal(into, s)


def test_load_without_into_and_a_dtype_numpy_lacks(client: cairn.Client) -> None:
    """A dtype name numpy cannot make (torch's bfloat16) is named; a manifest
    whose byte size disagrees with its dtype and shape is refused."""
    from cairn import _state

    stored = {"w": _state.Entry("w", 2, "bfloat16", (2,), 4), "b": _state.Entry("b", 3, "float32", (1,), 4)}
    with pytest.raises(cairn.UnsupportedError, match=r"numpy has no dtype for 'w' \(bfloat16\)"):
        _state.allocate(stored, "version 0 of 'x'")
    bad = {"w": _state.Entry("w", 2, "float32", (3,), 8)}
    with pytest.raises(cairn.InvalidArgumentError, match="gives 'w' 8 bytes"):
        _state.allocate(bad, "version 0 of 'x'")


def test_load_without_into_of_a_plain_checkpoint(client: cairn.Client) -> None:
    client.protect(5, np.zeros(10))
    client.checkpoint("plain", 0)
    client.unprotect(5)
    with pytest.raises(cairn.InvalidArgumentError, match="not written by Client.save"):
        client.load("plain", 0)
    with pytest.raises(cairn.NotFoundError, match="version 1 of 'plain'"):
        client.load("plain", 1)


def test_save_stores_only_changed_chunks_by_default(make_client: Callable[..., cairn.Client]) -> None:
    w = np.zeros(1 << 20, np.uint8)  # 16 hash chunks of 64 KiB
    with make_client() as c:
        c.save("m", 1, {"w": w})
        c.wait("m", 1)
        w[70000] = 1  # the second chunk
        c.save("m", 2, {"w": w})
        c.wait("m", 2)
        st = c.stats()
        assert st.changes.layered_versions == 1
        assert st.changes.full_versions == 1
        assert st.changes.bytes_hashed >= 2 * w.nbytes
        # Version 2 stored one chunk (plus the small header and manifest).
        assert st.flush_local.bytes < w.nbytes + 2 * 65536
        np.testing.assert_array_equal(c.load("m", 2)["w"], w)
        assert c.load("m", 1)["w"][70000] == 0
    with make_client() as c:  # a new client reads the chain from the files
        np.testing.assert_array_equal(c.load("m", 2)["w"], w)


def test_save_with_changes_full_stores_everything(make_client: Callable[..., cairn.Client]) -> None:
    w = np.zeros(1 << 20, np.uint8)
    with make_client() as c:
        for v in (1, 2):
            c.save("m", v, {"w": w}, changes="full")
            c.wait("m", v)
        assert c.stats().changes.layered_versions == 0
        assert c.stats().flush_local.bytes >= 2 * w.nbytes


def test_protect_with_its_own_changes(make_client: Callable[..., cairn.Client]) -> None:
    a = np.zeros(1 << 20, np.uint8)
    with make_client() as c:
        with pytest.raises(cairn.InvalidArgumentError, match="changes"):
            c.protect(0, a, changes="sometimes")  # type: ignore[arg-type]
        c.protect(0, a, changes="hash")  # the client is "full"
        for v in (1, 2):
            a[v * 100000] = v
            c.checkpoint("p", v)
            c.wait("p", v)
        assert c.stats().changes.layered_versions == 1
        a[:] = 0
        c.restore("p", 2)
        assert a[100000] == 1 and a[200000] == 2


def test_tracked_arrays_from_cairn_empty(make_client: Callable[..., cairn.Client]) -> None:
    u = cairn.empty((256, 1024), np.float64)  # 2 MiB of tracked memory
    assert u.shape == (256, 1024) and u.dtype == np.float64 and not u.any()
    assert u.ctypes.data % 4096 == 0
    with pytest.raises(cairn.InvalidArgumentError):
        cairn.alloc(0)
    with make_client(changes="pages") as c:
        c.protect(0, u)
        for v in (1, 2):
            u[v, 7] = v  # one page each time
            c.checkpoint("t", v)
            c.wait("t", v)
        st = c.stats().changes
        assert st.layered_versions == 1 and st.fallbacks == 0, st.fallback_note
        assert c.stats().flush_local.bytes == u.nbytes + 4096  # version 2: the one page written
        u[:] = 0
        c.restore("t", 2)
        assert u[1, 7] == 1 and u[2, 7] == 2


def test_zero_copy_save_of_unaligned_arrays(make_client: Callable[..., cairn.Client]) -> None:
    """capture="zero-copy": numpy arrays (not page-aligned) are captured
    zero-copy, not copied instead; each version is the arrays at the call
    though they are written right after it and the caller drops them."""
    c = make_client(capture="zero-copy", keep_versions=10)
    rng = np.random.default_rng(5)
    arrays = {f"a{i}": rng.standard_normal(300_001 + i) for i in range(4)}
    arrays["small"] = np.arange(3, dtype=np.int32)
    assert all(a.ctypes.data % 4096 != 0 or a.nbytes % 4096 != 0 for a in arrays.values())
    expect = []
    for v in range(1, 4):
        expect.append({k: a.copy() for k, a in arrays.items()})
        c.save("zc", v, arrays, changes="full")
        for a in arrays.values():
            a += 1  # in place, while the version may still be read
        arrays = {k: a.copy() for k, a in arrays.items()}  # the saved objects are dropped
    c.wait("zc", 3)
    zc = c.stats().zero_copy
    assert (zc.versions, zc.fallbacks) == (3, 0), zc.note
    for v, want in enumerate(expect, start=1):
        got = c.load("zc", v)
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
