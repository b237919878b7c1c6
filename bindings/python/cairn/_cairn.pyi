"""Type stubs of the extension module cairn._cairn (bindings/python/src/module.cpp).

Internal: the public API is the `cairn` package. Failed calls raise the
cairn.Error subclass of their C error code.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

def load_config(path: Optional[str]) -> Config:
    """Defaults, then the TOML file (None: $CAIRN_CONFIG or none), then CAIRN_* variables; validated."""

def parse_size(text: str) -> int:
    """'512MiB' -> 536870912 (docs/config.md, Sizes)."""

def alloc(bytes: int) -> Any:
    """cairn_alloc: zero-filled, page-aligned memory as a uint8 numpy array."""

def format_size(bytes: int) -> str:
    """536870912 -> '512 MiB'."""

def stats_fields() -> List[Tuple[str, str, str]]:
    """[(name, kind, doc)] of include/cairn/cairn_stats.def."""

def config_keys() -> List[Tuple[str, str, str, str, str]]:
    """[(keyword, attribute, TOML key, environment variable, kind)] of include/cairn/config_keys.def."""

def set_log(fn: Optional[Callable[[int, str], Any]]) -> None:
    """Route Cairn's messages to fn(level, message) (logging.ERROR, WARNING or INFO); None: stderr."""

def error_codes() -> List[Tuple[int, str, str]]:
    """[(code, C name, Python class)] of include/cairn/cairn_errors.def."""

class Config:
    """cairn::Config (include/cairn/config.hpp)."""

    scratch_dir: str
    persistent_dir: str
    persist_from_cache: bool
    file_mode: int
    direct_io: bool
    fsync: bool
    host_cache_bytes: int
    host_cache_grow: bool
    block_bytes: int
    copy_threads: int
    keep_versions: int
    prefetch_depth: int
    history_persistent: bool
    trace_path: str
    init: str
    huge_pages: bool
    pin: bool
    pin_serialize: bool
    pin_lock_path: str
    host_cache_numa: str
    device_cache_bytes: int
    device_cache_init: str
    device_map_chunk_bytes: int
    device: int
    bounce_buffers: int
    changes: str
    max_layers: int
    hash_chunk_bytes: int
    record_placement: bool
    placement: str
    capture: str
    cow_fraction: float
    zero_copy_order: str
    write_protect: str
    l2_every: int
    l3_every: int
    l3_group: int
    l4_every: int
    progress_thread: bool
    ranks_per_node: int
    mtbf_s: float
    def validate(self) -> None: ...

class History:
    def push(self, step: int, data: object) -> None: ...
    def pop(self, step: int, out: object) -> int: ...
    def step_size(self, step: int) -> int: ...
    def close(self) -> None: ...

class Client:
    def __init__(self, config: Config) -> None: ...
    @staticmethod
    def open_mpi(
        config: Optional[Config], error_code: int, error: str, fcomm: int, library: str
    ) -> "Client": ...
    def protect(
        self,
        id: int,
        obj: object,
        writable: bool = True,
        changes: Optional[str] = None,
        reserve: bool = True,
    ) -> None: ...
    def unprotect(self, id: int, wait: bool = True) -> None: ...
    def checkpoint(self, name: str, version: int) -> None: ...
    def wait(self, name: str, version: int, level: int) -> None: ...
    def checkpoint_due(self, name: str) -> bool: ...
    def latest(self, name: str) -> Optional[int]: ...
    def restore(self, name: str, version: int, shared_on_node: bool = False) -> None: ...
    def restore_latest(self, name: str) -> Optional[int]: ...
    def register_thread(self, index: int) -> None: ...
    def restore_affinity(self, index: int) -> None: ...
    def begin_restore(self) -> None: ...
    def end_restore(self) -> None: ...
    def saved_latest(self, name: str) -> Optional[Tuple[int, int]]: ...
    def saved_ranks(self, name: str, version: int) -> int: ...
    def saved_region_size(self, name: str, version: int, saved_rank: int, region: int) -> int: ...
    def read_saved_region(
        self, name: str, version: int, saved_rank: int, region: int, out: object, offset: int
    ) -> None: ...
    def open_history(self, name: str) -> History: ...
    def stats(self) -> Dict[str, Union[int, float, str]]: ...
    def close(self) -> None: ...
    def config(self) -> Config: ...
