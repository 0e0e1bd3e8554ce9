"""Compile C kernels with the system compiler into shared libraries, cached on disk.

A library is keyed by the hash of its source, the flags (the ``-march`` target included) and
the compiler's identity (its ``--version`` and the CPU model, since ``-march=native`` code is
only valid on this CPU). It is
built under a temporary name and renamed into place, so two processes compiling the same
source at once both end with one whole file. ``LAZYFUSE_CC`` picks the compiler.

NaN and inf must behave as in torch, so the flags never assume finite math:
``-fno-math-errno -fno-trapping-math`` only let gcc vectorise sqrt and compares. Each op's result
rounds as torch's does: ``-ffp-contract=off`` (see ``FLAGS``).

Every parallel region of a kernel asks for ``num_threads(lf_threads())``: a launch's own count
where its launcher set one (``lf_launch_threads``, per OS thread), else ``lf_num_threads``, one
process-wide variable. Both are defined by a library of their own that is loaded
(``RTLD_GLOBAL``) before any kernel library, whose references to them the loader resolves there
(``thread_count``, ``launch_on``). The thread budget (``runtime/threads.py``) writes the
process-wide count; ``lf_launch_on`` runs one kernel on a count of its own (a tuned config's,
``CConfig.threads``), so a serial candidate is the same compiled function launched another way,
never a second compile. OpenMP's own thread count (``omp_set_num_threads``) is left alone:
torch's CPU ops run on the same libgomp and read it as torch's setting.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import config
from ..errors import CompileError
from .cache import atomic_write, cache_dir

# -fwrapv: torch's integer arithmetic wraps (two's complement) and so must the kernels'; C leaves
# signed overflow undefined and gcc -O3 folds on it, e.g. `(a + 1) > a` to true for int32 a = INT_MAX
# (torch: False). Measured on Zen 4 at 2^20 (int and float chains, strided and transposed reads):
# no difference beyond the run-to-run noise.
# -ffp-contract=off: torch rounds every op's result, but GNU C's default (fast) lets gcc fuse one
# op's last product into the next op's addition inside a fused kernel (an FMA: the product never
# rounded), so `a * b + c` recorded as two ops differed from torch's in the last bit and
# `x - x.mean()` of equal values was the product's rounding error instead of 0. Where a multiply-add
# is meant as one instruction (c_math.h's polynomials, torch's own fused forms such as lerp's) the
# source says so (LF__MADDF/LF__MADD).
FLAGS = ["-O3", "-fwrapv", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fPIC",
         "-shared", "-std=gnu11", "-w"]


def march() -> str:
    """The target of ``-march`` (``LAZYFUSE_MARCH``, default ``native``): e.g. ``x86-64-v2`` to
    test the kernels as a baseline x86-64 CPU runs them, on a CPU that can execute both."""
    return config.MARCH.get() or "native"


def vector_width() -> int | None:
    """The SIMD width (bits) the compiler is told to prefer (``LAZYFUSE_VECTOR_WIDTH``), or None
    for the compiler's own choice. ``auto`` is 512 where the target has AVX-512: gcc's tuning for
    Intel server cores (what ``-march=native`` picks on a Xeon) prefers 256-bit vectors, against
    the clock drop of 512-bit code on 2017's cores, and so runs the compute-bound kernels (exp,
    erf, sin, pow ...) on half the lanes the CPU has. Measured on an AVX-512/AMX Xeon
    (bench/results/native_ops-2026-12-02-ninth-*.md): 512 makes pow 1.4x, log1p 1.4x and mish
    1.1x faster, memory-bound kernels unchanged; on Zen 4 gcc already picks 512."""
    width = config.VECTOR_WIDTH.get()
    if width is not None:
        return width
    cc = compiler()
    return 512 if cc is not None and _has_avx512(cc, march()) else None


@functools.lru_cache(maxsize=None)
def _target_macros(cc: str, target: str) -> str:
    """The macros ``cc`` predefines for ``-march=target`` (what the target has), or "" where it cannot say."""
    try:
        return subprocess.run([cc, f"-march={target}", "-dM", "-E", "-x", "c", os.devnull],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _has_avx512(cc: str, target: str) -> bool:
    """Whether ``-march=target`` gives ``cc`` AVX-512F."""
    return "__AVX512F__" in _target_macros(cc, target)


def _no_native_half(cc: str | None, target: str) -> list:
    """``-mno-avx512fp16`` where the target has AVX512-FP16 (Sapphire Rapids and later): there gcc
    narrows ``(_Float16)(float)a * (float)b`` to a native half multiply and contracts it with the
    next op into one half FMA, so the product is not rounded before the add (``x - t * l`` in
    float16 differed from torch's in a third of the elements). The kernels compute in float and
    round each op's result (the README's float16 rule): they need no half arithmetic, only the
    F16C conversions."""
    return ["-mno-avx512fp16"] if cc is not None and "__AVX512FP16__" in _target_macros(cc, target) else []


def flags() -> list:
    """The compiler flags, the target and the vector width included (read on each build: a test
    may change them)."""
    width = vector_width()
    prefer = [f"-mprefer-vector-width={width}"] if width else []
    return [FLAGS[0], f"-march={march()}", *_no_native_half(compiler(), march()), *prefer, *FLAGS[1:]]


MAX_LOADED = config.MAX_LOADED_LIBRARIES.get()
_lock = threading.Lock()
_building: dict = {}   # library key -> the lock its (one) compile holds
compiler_runs = 0   # compiler invocations in this process (lf.stats() counts each device's own)


class LibraryCache:
    """Loaded libraries by key: the ``MAX_LOADED`` most recently used held here, the ones pushed
    out kept only by weak reference — alive while a plan or graph holds one of their functions
    (a function pointer keeps its library object alive), unloaded when the last such goes."""

    def __init__(self):
        self.recent: OrderedDict = OrderedDict()
        self.retired = weakref.WeakValueDictionary()
        self.unloaded = 0   # libraries dlclose'd so far
        self._collect_at = MAX_LOADED

    def get(self, key: str):
        lib = self.recent.get(key)
        if lib is None:
            lib = self.retired.pop(key, None)   # still in use elsewhere: the same mapping, revived
            if lib is None:
                return None
            self.recent[key] = lib
        self.recent.move_to_end(key)
        self._bound()
        return lib

    def put(self, key: str, lib: ctypes.CDLL) -> None:
        weakref.finalize(lib, self._unload, lib._handle)
        self.recent[key] = lib
        self._bound()

    def _bound(self) -> None:
        while len(self.recent) > max(MAX_LOADED, 1):
            key, lib = self.recent.popitem(last=False)
            self.retired[key] = lib
        if len(self.retired) > self._collect_at:
            # a library and its ctypes functions form reference cycles: the retired ones no plan
            # or graph uses any more are only freed (and unloaded) by a collection, run once per
            # MAX_LOADED retirements so a process full of cached plans does not collect per build
            gc.collect()
            self._collect_at = len(self.retired) + max(MAX_LOADED, 1)

    def _unload(self, handle: int) -> None:
        import _ctypes
        _ctypes.dlclose(handle)
        self.unloaded += 1

    def __len__(self) -> int:
        return len(self.recent) + len(self.retired)


_loaded = LibraryCache()


def compiler() -> str | None:
    cc = config.CC.get()
    if cc:
        return shutil.which(cc) or (cc if Path(cc).exists() else None)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.lru_cache(maxsize=None)
def _identity(cc: str) -> str:
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"C compiler {cc!r} does not run: {e}") from e
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                cpu += line
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    return version + cpu


def identity_hash() -> str:
    """A short hash of the compiler, the CPU and the flags, target and vector width included (part of
    autotuning keys)."""
    cc = compiler()
    return hashlib.sha256((_identity(cc) + " ".join(flags())).encode()).hexdigest()[:12] if cc else "none"


def library_key(source: str, cc: str) -> str:
    h = hashlib.sha256()
    for part in (source, " ".join(flags()), _identity(cc)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def usable() -> str | None:
    """Why C kernels cannot be built here (no compiler, or one that fails on a trivial
    kernel), or None when they can. The probe library is cached like any other."""
    cc = compiler()
    if cc is None:
        cc = config.CC.get()
        return f"LAZYFUSE_CC={cc!r} is not an executable C compiler" if cc else "no C compiler (cc, gcc, clang) on PATH"
    try:
        build("void lf_probe(char **args, const long *meta) { (void)args; (void)meta; }\n", what="compiler probe")
    except CompileError as e:
        target = f" with -march={march()} (LAZYFUSE_MARCH)" if march() != "native" else ""
        return f"the C compiler {cc} fails on a trivial kernel{target} ({' '.join(str(e).split())[-300:]})"
    return None


def build(source: str, what: str = "kernel", stats=None) -> ctypes.CDLL:
    """The loaded library for ``source``, compiling it on a cache miss (counted in
    ``stats.compiler_runs`` when given)."""
    cc = compiler()
    if cc is None:
        raise CompileError("no C compiler found (set LAZYFUSE_CC, or install gcc)")
    key = library_key(source, cc)
    with _lock:
        lib = _loaded.get(key)
        if lib is not None:
            return lib
        # one lock per library: two threads building the same source wait for one compile, while
        # different sources compile at the same time (``build_many``)
        key_lock = _building.setdefault(key, threading.Lock())
    with key_lock:
        with _lock:
            lib = _loaded.get(key)
        if lib is None:
            lib = _compile_and_load(cc, source, key, what, stats)
            with _lock:
                _loaded.put(key, lib)
                _building.pop(key, None)
        return lib


# what a compiler process is given at least: ``MIN_PART`` functions, or ``MIN_PART_CHARS`` of
# source, whichever makes more parts. Below both, starting another process (~50 ms, most of it
# the prelude) costs more than the part it would take off the others; a few large kernels (an
# optimizer's foreach over every parameter, ~60 KB) are seconds of compiling, worth a core each.
MIN_PART = 16
MIN_PART_CHARS = 12_000
SYMBOL_SLOT = "lf_kernel"   # the name a kernel's source is written with before it is named by its hash


def named(source: str, prelude: str) -> tuple:
    """(symbol, source) for a kernel ``source`` that defines one function named ``SYMBOL_SLOT``:
    the symbol is a hash of that source, the ``prelude`` it is compiled after, the flags and the
    compiler, so one symbol is one machine code, found compiled in any plan and any process."""
    cc = compiler()
    symbol = "lf_" + library_key(prelude + "\0" + source, cc or "none")[:24]
    return symbol, source.replace(f"void {SYMBOL_SLOT}(", f"void {symbol}(", 1)


def build_functions(sources: dict, prelude: str, what: dict, stats=None) -> dict:
    """symbol -> the function (or the ``CompileError`` naming ``what[symbol]``) of each of
    ``sources`` (symbol -> a source from ``named``).

    A symbol compiled before, in this process or one that shares the disk cache, is loaded from
    the library that holds it and never compiled again; the missing ones are compiled in one go,
    a few libraries of at least ``MIN_PART`` functions or ``MIN_PART_CHARS`` of source each by
    parallel compiler processes (``build_many``): a compiler process costs ~50 ms to start and
    parse the prelude, as much as one small kernel. A library that fails is rebuilt function by function, so one bad kernel
    costs only its own error."""
    out = {}
    missing = []
    for symbol in sources:
        lib = _library_holding(symbol)
        if lib is None:
            missing.append(symbol)
        else:
            out[symbol] = function(lib, symbol)
    if not missing:
        return out
    cc = compiler()
    if cc is None:
        raise CompileError("no C compiler found (set LAZYFUSE_CC, or install gcc)")
    chars = sum(len(sources[s]) for s in missing)
    n_parts = max(1, min(compile_jobs(), len(missing), max(len(missing) // MIN_PART, chars // MIN_PART_CHARS)))
    parts = balanced_parts(missing, n_parts, lambda s: len(sources[s]))
    texts = [prelude + "\n\n".join(sources[s] for s in part) + "\n" for part in parts]
    label = what[missing[0]] if len(missing) == 1 else f"{len(missing)} kernels"
    for part, text, lib in zip(parts, texts, build_many(texts, what=label, stats=stats)):
        if len(part) > 1 and isinstance(lib, CompileError):
            for s in part:   # which one failed: each alone
                try:
                    out[s] = _record(s, build(prelude + sources[s] + "\n", what=what[s], stats=stats),
                                     prelude + sources[s] + "\n", cc, what[s])
                except CompileError as e:
                    out[s] = e
        elif isinstance(lib, CompileError):
            out[part[0]] = lib   # alone in its part only when it is the one missing: named by ``label``
        else:
            for s in part:
                out[s] = _record(s, lib, text, cc, what[s])
    return out


def balanced_parts(symbols: list, n_parts: int, size) -> list:
    """``symbols`` in ``n_parts`` parts of about equal total ``size`` (a source's length, the
    compile time's proxy): the largest first, each into the part with the least so far, so the
    compiler processes, which run at once, finish together. The same set makes the same parts,
    whatever the plan's order (ties go by symbol)."""
    parts, totals = [[] for _ in range(n_parts)], [0] * n_parts
    for s in sorted(symbols, key=lambda s: (-size(s), s)):
        k = totals.index(min(totals))
        parts[k].append(s)
        totals[k] += size(s)
    return [sorted(part) for part in parts]


_holder: dict = {}   # symbol -> key of the library that holds it (this process's index)


def _index(symbol: str) -> Path:
    return cache_dir("c", "index") / symbol


def _record(symbol: str, lib: ctypes.CDLL, text: str, cc: str, what: str):
    """Note (here and on disk) which library holds ``symbol``; its function (a ``CompileError``
    when the library has none: its source did not define the function ``named`` expects)."""
    try:
        fn = function(lib, symbol)
    except AttributeError:
        return CompileError(f"{what}: its source defines no function {SYMBOL_SLOT}")
    key = library_key(text, cc)
    _holder[symbol] = key
    try:
        atomic_write(_index(symbol), key.encode())
    except OSError:
        pass   # a read-only cache only costs a compile in the next process
    return fn


def _library_holding(symbol: str):
    """The loaded library that defines ``symbol`` (from memory, or the disk cache's index), or
    None when no intact library does."""
    key = _holder.get(symbol)
    if key is None:
        try:
            key = _index(symbol).read_text().strip()
        except OSError:
            return None
    with _lock:
        lib = _loaded.get(key)
    if lib is None:
        so = cache_dir("c") / f"{key}.so"
        try:
            lib = _dlopen(so)
            getattr(lib, symbol)
        except (OSError, AttributeError):
            return None   # gone, truncated or foreign: compiled again
        with _lock:
            _loaded.put(key, lib)
    _holder[symbol] = key
    return lib


def build_many(sources: list, what: str = "kernels", stats=None) -> list:
    """``build`` of each source, compiled by a pool of compiler processes, one per usable core:
    the libraries (or the ``CompileError`` each failed with), in order."""
    def one(k_src):
        k, src = k_src
        try:
            return build(src, what=f"{what} (part {k + 1} of {len(sources)})", stats=stats)
        except CompileError as e:
            return e
    if len(sources) <= 1:
        return [one(ks) for ks in enumerate(sources)]
    with ThreadPoolExecutor(max_workers=min(len(sources), compile_jobs())) as pool:
        return list(pool.map(one, enumerate(sources)))


def compile_jobs() -> int:
    """How many compiler processes run at once: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


_THREAD_COUNT_SOURCE = r"""
#include <stdint.h>
int lf_num_threads = 1;          /* the thread budget's count */
__thread int lf_launch_threads;  /* this OS thread's launch's own count; 0: lf_num_threads */
typedef void (*lf_kernel)(char **, const int64_t *);
void lf_launch_on(int64_t threads, lf_kernel f, char **args, const int64_t *meta) {
    int saved = lf_launch_threads;
    lf_launch_threads = (int)threads;
    f(args, meta);
    lf_launch_threads = saved;
}
"""


@functools.lru_cache(maxsize=None)
def _thread_count_library() -> ctypes.CDLL:
    """The library defining ``lf_num_threads``, ``lf_launch_threads`` and ``lf_launch_on``,
    loaded once and kept (never in ``_loaded``, so never unloaded while a kernel may read it)."""
    cc = compiler()
    if cc is None:
        raise CompileError("no C compiler found (set LAZYFUSE_CC, or install gcc)")
    return _compile_and_load(cc, _THREAD_COUNT_SOURCE, library_key(_THREAD_COUNT_SOURCE, cc),
                             "thread-count variable", shared=True)


def thread_count() -> ctypes.c_int:
    """The process-wide ``lf_num_threads`` that every kernel's parallel region reads."""
    return ctypes.c_int.in_dll(_thread_count_library(), "lf_num_threads")


@functools.lru_cache(maxsize=None)
def launch_on():
    """``lf_launch_on(threads, kernel, args, meta)``: ``kernel`` run with its parallel regions on
    ``threads`` threads (the thread that calls it only; a region's count is read by the thread
    that opens it), then that thread's count as it was."""
    fn = _thread_count_library().lf_launch_on
    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = None
    return fn


def _dlopen(so: Path, shared: bool = False) -> ctypes.CDLL:
    """Load a library: a kernel library after the thread-count one, since its references to
    ``lf_num_threads`` and ``lf_launch_threads`` are resolved when it loads; ``shared``: that one, its symbols global."""
    if shared:
        return ctypes.CDLL(str(so), mode=ctypes.RTLD_GLOBAL)
    _thread_count_library()
    return ctypes.CDLL(str(so))


def _compile_and_load(cc: str, source: str, key: str, what: str, stats=None, shared=False) -> ctypes.CDLL:
    folder = cache_dir("c")
    so = folder / f"{key}.so"
    if not so.exists():
        _compile(cc, source, so, what, stats)
    try:
        lib = _dlopen(so, shared)
    except OSError as e:
        # a truncated or foreign file: rebuild once, then give up loudly
        try:
            so.unlink()
        except FileNotFoundError:
            pass
        _compile(cc, source, so, what, stats)
        try:
            lib = _dlopen(so, shared)
        except OSError as e2:
            raise CompileError(f"{what}: compiled library {so} does not load: {e2}") from e
    return lib


def _compile(cc: str, source: str, so: Path, what: str, stats=None) -> None:
    global compiler_runs
    with _lock:   # build_many compiles from several threads
        compiler_runs += 1
        if stats is not None:
            stats.compiler_runs += 1
    (so.parent / (so.stem + ".c")).write_text(source)
    fd, tmp = tempfile.mkstemp(dir=so.parent, prefix=so.stem + ".", suffix=".so.tmp")
    os.close(fd)
    try:
        proc = subprocess.run([cc, *flags(), "-x", "c", "-", "-o", tmp, "-lm"], input=source,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise CompileError(f"{what}: {cc} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        os.replace(tmp, so)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"{what}: cannot run {cc}: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def function(lib: ctypes.CDLL, name: str):
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = None
    return fn


def cached(key: str) -> ctypes.CDLL | None:
    """The library built before under ``key``, from memory or the on-disk cache, without
    compiling (None where neither has it): how a stored plan takes its kernels back."""
    with _lock:
        lib = _loaded.get(key)
    if lib is not None:
        return lib
    so = cache_dir("c") / f"{key}.so"
    if not so.exists():
        return None
    try:
        lib = _dlopen(so)
    except OSError:
        return None
    with _lock:
        known = _loaded.get(key)
        if known is not None:
            return known
        _loaded.put(key, lib)
    return lib


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def library_of(fn) -> str | None:
    """The key of the cached library that defines kernel function ``fn`` (its file's name),
    or None for a function from elsewhere."""
    info = _DlInfo()
    if not ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return None
    path = Path(info.dli_fname.decode())
    named = path.suffix == ".so" and len(path.stem) == 32 and all(c in "0123456789abcdef" for c in path.stem)
    return path.stem if named else None
