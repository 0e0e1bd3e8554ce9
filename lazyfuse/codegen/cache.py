"""The on-disk cache folder shared by compiled kernels and autotuning results.

``LAZYFUSE_CACHE_DIR`` overrides the location (default ``~/.cache/lazyfuse``). Writers always
write a temporary file in the same folder and ``os.replace`` it into place, so a reader (in
this process or another) sees either nothing or a whole file.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import config


def cache_dir(*parts: str) -> Path:
    root = Path(config.CACHE_DIR.get() or Path.home() / ".cache" / "lazyfuse")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
