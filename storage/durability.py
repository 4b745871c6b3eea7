"""Making file-system changes durable: fsync of a directory (file creations, renames, removals)
and atomic replacement of a small file."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import KafkaStorageException


def fsync_path(path: Path) -> None:
    """fsync a file or directory; quietly skips one that is gone (a log or snapshot being deleted)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path


def write_atomically(path: Path, content: str | bytes, suffix: str = ".tmp") -> None:
    """Write a sibling named `path` + `suffix`, fsync it, rename it over `path`, fsync the
    directory: a crash leaves either the old file or the new one (text is written as UTF-8)."""
    tmp = path.with_name(path.name + suffix)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_path(path.parent)
    except OSError as e:
        raise KafkaStorageException(f"Error while writing {path}: {e}") from e
