"""Every ``LAZYFUSE_*`` environment knob, declared once: name, default, parser, help.

A module reads a knob through its ``Knob`` (``config.AUTOTUNE.get()``), never through
``os.environ``, so each knob has one parser and one error for a bad value: a ``ConfigError``
(a ``LazyfuseError`` and a ``ValueError``) naming the knob, the value and what it accepts — or
the error the knob declares, where the failure surfaces somewhere that already has one (the
parallel threshold is read while a kernel is printed: a ``CompileError``, which fails that build
and leaves the engine working). An unset or empty variable takes the default, except that an
empty boolean is off.

``read`` says when a module reads the knob: ``"import"`` knobs are read once, when lazyfuse is
imported (the engine's hot path reads a module constant, not the environment); ``"use"`` knobs
each time they matter (so a test may change them with ``monkeypatch.setenv``).
``python -m lazyfuse config`` prints each knob, its current value and its help; the README's
knob table is ``markdown_table()`` (``tests/test_config.py`` holds the two equal).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

from .errors import CompileError, ConfigError, DeviceError

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no", "")


def _bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError


def _whole_number(raw: str) -> int:
    value = int(raw.strip())   # "1.5", "lots": ValueError
    if value < 0:
        raise ValueError
    return value


def _text(raw: str) -> str:
    return raw.strip()


def _vector_width(raw: str):
    """``auto`` (None) or a width in bits: 128, 256 or 512."""
    low = raw.strip().lower()
    if low == "auto":
        return None
    if low not in ("128", "256", "512"):
        raise ValueError
    return int(low)


def _thread_count(raw: str):
    """``auto`` (None) or a count >= 1."""
    low = raw.strip().lower()
    if low == "auto":
        return None
    value = int(low)
    if value < 1:
        raise ValueError
    return value


# os.environ's own store (its encoded names and values), which ``os.environ.get`` reads: every change
# made through os.environ (``monkeypatch.setenv`` included) is there. ``Knob.raw`` looks a name up in
# it directly, one dict lookup (~40 ns) where ``os.environ.get`` encodes the name and, for an unset
# variable, raises and catches a KeyError (~0.4 us, once per cpu drain for LAZYFUSE_ASYNC).
_ENVIRON_STORE = getattr(os.environ, "_data", None) if hasattr(os.environ, "encodekey") else None

_ALLOWED = {_bool: "a boolean (1/0, true/false, on/off, yes/no)", _whole_number: "a whole number >= 0",
            _text: "any text", _thread_count: "'auto' or a thread count >= 1",
            _vector_width: "'auto', 128, 256 or 512"}


@dataclass(frozen=True)
class Knob:
    name: str
    default: object                 # the value when the variable is unset (None: decided by the reader)
    parse: Callable[[str], object]  # raises ValueError on a value it refuses
    read: str                       # "import" or "use" (see the module docstring)
    help: str                       # the README table's text
    hint: str = ""                  # what to do about a bad value, beyond the allowed values
    error: type = ConfigError       # raised for a bad value

    @property
    def allowed(self) -> str:
        return _ALLOWED[self.parse]

    def raw(self):
        """The variable's value as the process's environment stores it (None: unset), unparsed and
        equal while it is unchanged: for a hot path that parses it only when it changed (the
        asynchronous stream looks at its knob at every drain)."""
        if _ENVIRON_STORE is None:
            return os.environ.get(self.name)
        return _ENVIRON_STORE.get(self._stored_name)

    @functools.cached_property
    def _stored_name(self):
        return os.environ.encodekey(self.name)

    def get(self):
        """The knob's value now: the parsed variable, or the default when unset (or empty)."""
        raw = os.environ.get(self.name)
        if raw is None or (not raw.strip() and self.parse is not _bool):
            return self.default
        try:
            return self.parse(raw)
        except ValueError:
            default = "" if self.default is None else f", {self.default}"
            hint = f"; {self.hint}" if self.hint else ""
            raise self.error(f"{self.name}={raw!r} is not {self.allowed}{hint}: set it to one, or unset it for "
                             f"the default{default}") from None


KNOBS: dict[str, Knob] = {}


def _declare(*args, **kwargs) -> Knob:
    knob = Knob(*args, **kwargs)
    KNOBS[knob.name] = knob
    return knob


CACHE_DIR = _declare(
    "LAZYFUSE_CACHE_DIR", None, _text, "use",
    "where compiled kernels and autotuning choices are cached (default `~/.cache/lazyfuse`)")
AUTOTUNE = _declare(
    "LAZYFUSE_AUTOTUNE", True, _bool, "use",
    "`0` skips benchmarking candidates and takes the heuristic default config (default on)")
AUTOTUNE_FORCE = _declare(
    "LAZYFUSE_AUTOTUNE_FORCE", None, _whole_number, "use",
    "`N`: every kernel takes its N-th autotune candidate (its last where it has fewer), unbenchmarked: how "
    "the tests run every candidate (default unset)",
    hint="a candidate index 0, 1, 2, ...", error=CompileError)
AUTOTUNE_AFTER = _declare(
    "LAZYFUSE_AUTOTUNE_AFTER", 1, _whole_number, "use",
    "the run of a plan at which its kernels are tuned: `1` (the default) tunes on the build path; N > 1 "
    "builds each kernel's heuristic default (or the tuned choice already cached) and tunes at the plan's "
    "N-th run, so a program that runs once never pays for tuning (a fast cold start: `3`)")
DEBUG = _declare(
    "LAZYFUSE_DEBUG", False, _bool, "import",
    "`1` prints each drain's path and launches")
DEVICE = _declare(
    "LAZYFUSE_DEVICE", None, _text, "use",
    "the default device when `lf.device()` gets none (e.g. `interpreter` to run any program through the "
    "Triton code; default `cuda` when torch sees a GPU, else `cpu`)")
INLINE_MATMUL = _declare(
    "LAZYFUSE_INLINE_MATMUL", 1 << 20, _whole_number, "import",
    "matmuls up to this many multiply-adds become fused reductions (default 2^20); larger ones are the "
    "Triton matmul template (cuda, interpreter) or BLAS + epilogue (cpu)")
CC = _declare(
    "LAZYFUSE_CC", None, _text, "use",
    "the C compiler (default: `cc`, `gcc` or `clang` on the PATH)")
MARCH = _declare(
    "LAZYFUSE_MARCH", "native", _text, "use",
    "the C compiler's `-march` target (default `native`), e.g. `x86-64-v2`; part of the library and "
    "autotuning keys")
VECTOR_WIDTH = _declare(
    "LAZYFUSE_VECTOR_WIDTH", None, _vector_width, "use",
    "the SIMD width in bits the C compiler prefers for the kernels' loops (`-mprefer-vector-width`): "
    "`auto` (default: 512 where the `-march` target has AVX-512, else the compiler's own choice), or "
    "128, 256, 512 (x86 compilers only); part of the library and autotuning keys")
THREADS = _declare(
    "LAZYFUSE_THREADS", None, _thread_count, "use",
    "threads of the C kernels' parallel regions: `auto` (default: the cores other processes leave free, "
    "re-measured every 0.1 s, at most torch's own count, `torch.get_num_threads()`) or a count; lazyfuse "
    "never changes torch's count", error=DeviceError)
ASYNC = _declare(
    "LAZYFUSE_ASYNC", False, _bool, "use",
    "`1` runs the cpu device's launches on a worker thread (an asynchronous stream, as CUDA's): a drain "
    "returns once its launches are queued, and only a host read or write of a buffer waits, for the "
    "launches that touch it; `lf.sync` waits for all and raises a launch's failure; captures, replays, "
    "collectives and the build path stay synchronous (default off)")
MAX_PENDING = _declare(
    "LAZYFUSE_MAX_PENDING", 4096, _whole_number, "import",
    "pending-queue size that triggers a drain on its own (default 4096)")
PLAN_CACHE = _declare(
    "LAZYFUSE_PLAN_CACHE", 512, _whole_number, "import",
    "how many fused plans stay cached (LRU, default 512; evictions are counted)")
PARALLEL_THRESHOLD = _declare(
    "LAZYFUSE_PARALLEL_THRESHOLD", 1 << 17, _whole_number, "use",
    "C kernels whose loops cost less than this many work units run without an OpenMP parallel region "
    "(default 131072, ~9 us of one core; a unit is a loaded element or a simple op, gelu 80, exp 20: "
    "`lazyfuse/codegen/c_parallel.py`); a huge value makes every C kernel serial (for a machine shared with "
    "other busy processes, where a worker may wait milliseconds for a core), 0 gives every loop a region",
    hint="a number of work units (a huge value makes every C kernel serial)", error=CompileError)
MAX_LOADED_LIBRARIES = _declare(
    "LAZYFUSE_MAX_LOADED_LIBRARIES", 1024, _whole_number, "import",
    "how many compiled kernel libraries (C) and modules (Triton) stay loaded (default 1024); past it the "
    "least recently used that no cached plan or live graph holds are unloaded, so a process can meet any "
    "number of shapes without running out of memory mappings")
SHAPE_GENERIC = _declare(
    "LAZYFUSE_SHAPE_GENERIC", True, _bool, "import",
    "`0` prints loop extents and a source's sizes as literals again (one compiled kernel per size) instead of reading them from "
    "the launch metadata (default on: one kernel serves every size of a structure)")
PLAN_STORE = _declare(
    "LAZYFUSE_PLAN_STORE", True, _bool, "use",
    "`0` stops writing compiled plans to the cache folder and reading them back (default on: a second "
    "process takes the first one's plans without planning or printing kernels)")
TEST_DEVICE = _declare(
    "LAZYFUSE_TEST_DEVICE", None, _text, "use",
    "the device `tests/test_capture_device.py` and `tests/test_interpreter.py` run on (default `cpu` and "
    "`interpreter`; `bench/gpu_check.py` sets `cuda`)")


def markdown_table() -> str:
    """The README's table of knobs (``tests/test_config.py`` checks the README holds it)."""
    rows = ["| variable | effect |", "|---|---|"]
    rows += [f"| `{k.name}` | {k.help} |" for k in KNOBS.values()]
    return "\n".join(rows)


def describe() -> str:
    """Each knob with its current value, where it comes from, and its help (``python -m lazyfuse config``)."""
    lines = []
    for k in KNOBS.values():
        raw = os.environ.get(k.name)
        try:
            value = repr(k.get())
        except Exception as e:   # a bad value: show the error rather than stop
            value = f"error: {e}"
        source = "default" if raw is None else f"from {k.name}={raw!r}"
        lines += [f"{k.name} = {value}   ({source}; read at {k.read})", f"    {k.help}", ""]
    return "\n".join(lines).rstrip() + "\n"
