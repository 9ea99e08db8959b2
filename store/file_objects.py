"""The embedded default object store: one file per object under a local folder.

A write goes to a temporary file, is fsynced, then hard-linked into place: `link` fails if
the name exists, which makes every key write-once without a lock, and a reader never sees a
half-written object. The checksum and write time live in a sidecar written before the link.
A process killed mid-write leaves its temporary file behind; the sweep removes those too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path

from chat_approvals.core.models import Clock, ObjectRef, SystemClock
from chat_approvals.store.base import ObjectExists, ObjectStore, verified

_META = ".meta"
_TMP = ".tmp"


class FileObjects(ObjectStore):
    def __init__(self, root: str | Path, clock: Clock | None = None) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.clock = clock or SystemClock()

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if (
            not key
            or key.startswith("/")
            or any(p in ("", ".", "..") for p in parts)
            or key.endswith(_META)
            or (
                parts[-1].startswith(".") and key.endswith(_TMP)  # the name of a write in progress
            )
        ):
            raise ValueError(f"bad object key: {key!r}")
        return self.root.joinpath(*parts)

    @staticmethod
    def _write_synced(path: Path, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def put(self, key: str, data: bytes) -> ObjectRef:
        path = self._path(key)
        if path.exists():
            raise ObjectExists(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(data).hexdigest()
        meta = json.dumps({"sha256": digest, "size": len(data), "written_at": self.clock.now()}).encode()
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{_TMP}")
        try:
            self._write_synced(tmp, meta)
            meta_path = Path(str(path) + _META)
            os.replace(tmp, meta_path)  # a stale sidecar from a failed earlier put is overwritten
            self._write_synced(tmp, data)
            try:
                os.link(tmp, path)
            except FileExistsError as e:
                raise ObjectExists(key) from e
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return ObjectRef(key=key, size=len(data), sha256=digest)

    def _read_verified(self, key: str, expected: str | None) -> bytes:
        path = self._path(key)
        data = path.read_bytes()  # FileNotFoundError is a KeyError-like miss for callers
        meta = json.loads(Path(str(path) + _META).read_bytes())
        return verified(key, data, meta["sha256"], expected)

    def get(self, ref: ObjectRef) -> bytes:
        try:
            return self._read_verified(ref.key, ref.sha256)
        except FileNotFoundError as e:
            raise KeyError(ref.key) from e

    def get_key(self, key: str) -> bytes | None:
        try:
            return self._read_verified(key, None)
        except FileNotFoundError:
            return None

    def sweep(self, older_than: float) -> int:
        removed = self._sweep_leftovers(older_than)
        for meta_path in self.root.rglob("*" + _META):
            try:
                written_at = float(json.loads(meta_path.read_bytes())["written_at"])
            except (OSError, ValueError, KeyError):
                continue
            if written_at < older_than:
                data_path = Path(str(meta_path)[: -len(_META)])
                with contextlib.suppress(FileNotFoundError):
                    data_path.unlink()
                    removed += 1
                meta_path.unlink(missing_ok=True)
        return removed

    def _sweep_leftovers(self, older_than: float) -> int:
        """Temporary files of writes that never finished (the writer died between its open and
        its link). A live write's file is seconds old, far younger than any sweep horizon."""
        removed = 0
        for tmp in self.root.rglob(".*" + _TMP):
            try:
                if tmp.is_file() and tmp.stat().st_mtime < older_than:
                    tmp.unlink()
                    removed += 1
            except FileNotFoundError:  # its writer finished (or another sweep won) meanwhile
                continue
        return removed
