"""Learned files: the one format both learners write and both hook-time readers read.

A learned file (the retrieval weights of ``memtier train``, the intervention
policy of ``memtier train policy``) is a YAML document of its own, marked by a
key that names its kind (``memtier_learned_weights``, ``memtier_intervention_policy``)
whose value is the format version. Writing never goes over the user's config
nor over a file without the marker; the write is atomic (temp file, then
replace), so a reader sees the old file or the new one. Reading is bounded by
the config's loader (no alias bomb, no deep nesting, no huge file). What the
document holds is checked by the room that reads it: ``recall.backends`` for
the weights, ``intervention.policy`` for the policy.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

#: Marker keys (value: the format version); they never change, files in the field carry them.
WEIGHTS_MARKER = "memtier_learned_weights"
POLICY_MARKER = "memtier_intervention_policy"


def read_artifact(path: str | Path, marker: str, *, reading: str, kind: str, hint: str = "",
                  max_bytes: int | None = None, max_nodes: int | None = None) -> dict[str, Any]:
    """The learned file at ``path`` as a mapping holding ``marker``; ConfigError (one line) otherwise.

    ``reading`` names the content in "cannot read <reading>", ``kind`` the file in "not <kind>",
    ``hint`` is appended to the missing-marker message. ``max_bytes``: a larger file is refused before
    any of it is parsed (only ``max_bytes + 1`` bytes are read); ``max_nodes``: the YAML values it may
    hold (default: a config's bound).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {reading}: {exc}") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise ConfigError(f"{path}: larger than {_size(max_bytes)}; not read as {kind}")
    return artifact_doc(raw, path, marker, reading=reading, kind=kind, hint=hint, max_nodes=max_nodes)


def artifact_doc(raw: bytes, path: str | Path, marker: str, *, reading: str, kind: str, hint: str = "",
                 max_nodes: int | None = None) -> dict[str, Any]:
    """The bytes of a learned file (read from ``path``) as a mapping holding ``marker``; ConfigError otherwise."""
    from ..safe_yaml import MAX_NODES, parse_yaml

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read {reading}: {exc}") from None
    doc = parse_yaml(text, str(path), max_nodes=max_nodes or MAX_NODES)
    if not isinstance(doc, dict) or marker not in doc:
        raise ConfigError(f"{path}: not {kind} (no '{marker}' key{hint})")
    return doc


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MiB" if n % (1 << 20) == 0 else f"{n:,} bytes"


def write_artifact(path: str | Path, marker: str, doc: dict[str, Any], *, header: str, kind: str,
                   config_source: str = "", refuse_config_name: bool = False,
                   check: Callable[[bytes], Any] | None = None) -> Path:
    """Write ``doc`` (which carries ``marker``) to ``path`` atomically, under a one-line ``header`` comment.

    Refused with ConfigError: the user's config file (``config_source``), a file named
    ``memtier.yaml`` (with ``refuse_config_name``), an existing file that is not YAML or has no
    ``marker`` key, and bytes that ``check`` (the reader's own validation) refuses: nothing is written
    that its reader would not read.
    """
    import yaml

    from ..safe_yaml import parse_yaml

    path = Path(path)
    if config_source and config_source != "<defaults>":
        try:
            if path.resolve() == Path(config_source).expanduser().resolve():
                raise ConfigError(f"{path}: this is your config file; write the {kind} to its own file")
        except OSError:
            pass
    if refuse_config_name and path.name == "memtier.yaml":
        raise ConfigError(f"{path}: memtier.yaml is a config file name; write the {kind} to its own file")
    if path.exists():
        try:
            existing = parse_yaml(path.read_bytes().decode("utf-8"), str(path))
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            raise ConfigError(f"{path}: exists and is not {kind} ({type(exc).__name__}); "
                              "refusing to overwrite") from None
        if not isinstance(existing, dict) or marker not in existing:
            raise ConfigError(f"{path}: exists and has no '{marker}' key; refusing to overwrite")
    from .files import atomic_write

    data = (f"# {header}; safe to delete\n" + yaml.safe_dump(doc, sort_keys=False)).encode("utf-8")
    if check is not None:
        check(data)
    atomic_write(path, data)
    return path


class FileCache:
    """What ``read`` made of a learned file, once per (path, size, mtime): validated once per process, and read
    again when the file changes (the calibration, the standing gate)."""

    def __init__(self, limit: int = 16):
        self.limit = limit
        self._items: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, read: Callable[[Path], Any], *, reading: str) -> Any:
        """``read(path)``, or what it returned for the file as it is now; ConfigError naming ``path`` when the file
        cannot be read (``reading``: what it holds, "the calibration")."""
        try:
            st = path.stat()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read {reading}: {exc}") from None
        key = (str(path), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._items.get(key)
        if hit is not None:
            return hit
        value = read(path)
        with self._lock:
            if len(self._items) >= self.limit:
                self._items.clear()
            self._items[key] = value
        return value


def bounded_number(value: Any, where: str, bound: float = 1e3) -> float:
    """A learned file's number: finite, within ±``bound``; ConfigError naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) \
            or abs(float(value)) > bound:
        raise ConfigError(f"{where}: expected a finite number within ±{bound:g}, got {value!r}"[:300])
    return float(value)


def load_named(key: str, name: str, workspace: str | Path, load: Callable[[Path | None], Any]) -> Any:
    """``load`` of the file the config key ``key`` names (``name``, relative: to ``workspace``; "" the shipped one,
    ``load(None)``); a bad named file's ConfigError starts with ``key``."""
    path = Path(name).expanduser() if name else None
    if path is not None and not path.is_absolute():
        path = Path(workspace) / path
    try:
        return load(path)
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}" if path is not None else str(exc)) from None
