"""The per-device caching memory pool, with the persistent mode graph capture needs.

Blocks are kept by (usage, size class) once freed and handed out again to the next request
of the same class. ``usage`` separates data buffers, launch metadata and autotuning scratch,
so a warmup that only produced one kind cannot satisfy a capture that needs another: this is
what makes the reproduced bugs deterministic (docs/semantics.md, The two reproduced bugs).

Graph capture (docs/semantics.md, The memory pool):
* ``prepare()`` opens a *private* segment: from then on freed blocks are kept there, apart
  from everything cached before, so only what the warmup itself freed can serve the capture
  (like torch's per-graph private pool).
* ``begin_capture()``: a request that the private segment cannot serve raises
  ``CaptureAllocationError`` instead of allocating.
* Both concern the thread that prepared the pool (the capturing one) only: other threads
  allocate and free in the shared cache as usual (recording from them is refused elsewhere).
* ``end_capture()`` (also after a failure) returns to normal mode; kept private blocks go back
  to the shared cache. Blocks a Graph still holds stay out of circulation until it dies, so
  work interleaved between replays can never be handed the graph's intermediates.

Memory shared with a peer (``lazyfuse.interop``): a block exported through DLPack or numpy
leaves the pool for good (``Buffer.export``), and imported memory is an ``ExternalBuffer`` that
never enters it, so the pool never hands memory a peer can still see to another tensor.
"""
from __future__ import annotations

import threading
from collections import defaultdict

from ..errors import CaptureAllocationError, DeviceError

DATA, META, SCRATCH = "data", "meta", "scratch"
EXPORTED = "exported"   # a block handed to a peer (DLPack, numpy): never kept for reuse
SHARED = "shared"       # a graph's intermediate lent to the captures of graphs sharing its pool


def size_class(nbytes: int) -> int:
    """Round up to 512 bytes, then to a quarter of the next power of two (<= 25% waste)."""
    n = (nbytes + 511) // 512 * 512 if nbytes > 512 else 512
    if n <= 1 << 16:
        return n
    q = 1 << (n.bit_length() - 3)
    return (n + q - 1) // q * q


class Block:
    __slots__ = ("nbytes", "usage", "data", "ptr", "epoch", "views")

    def __init__(self, nbytes, usage, data):
        self.nbytes = nbytes
        self.usage = usage
        self.data = data  # a 1-D uint8 torch tensor on the device
        self.ptr = data.data_ptr()
        self.epoch = 0    # the persistent segment it was handed out in (0: none)
        self.views = {}   # (dtype, View) -> torch view of ``data`` (library calls: runtime/cpu.typed_view)


def strided(flat, view):
    """The torch view of ``view``'s elements of ``flat``, a buffer's ``tensor``. ``as_strided``
    counts its offset from the start of ``flat``'s torch storage, not of ``flat``: a pooled
    buffer starts there, but an imported one (``ExternalBuffer``, a slice of its producer's
    storage, ``torch.arange(9)[4:]``) may start inside it."""
    return flat.as_strided(view.shape, view.strides, flat.storage_offset() + view.offset)


class Buffer:
    """A typed view of a pooled block; the block returns to the pool when the Buffer dies.

    The typed torch view (``tensor``) is made on first use: a compiled kernel binds only the
    address, so the steady state of a drain never pays for a torch view of its outputs.
    """

    __slots__ = ("pool", "block", "dtype", "numel", "_tensor", "__weakref__")

    def __init__(self, pool, block, dtype, numel):
        self.pool = pool
        self.block = block
        self.dtype = dtype
        self.numel = numel
        self._tensor = None

    @property
    def tensor(self):
        t = self._tensor
        if t is None:
            t = self._tensor = self.block.data[: self.numel * self.dtype.itemsize].view(self.dtype.torch)
        return t

    @property
    def ptr(self) -> int:
        return self.block.ptr

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool.release(self.block)

    def export(self) -> None:
        """Hand this memory to a peer (DLPack, numpy): the block leaves the pool for good and is
        freed by torch when the last view of it dies, so it can never back another tensor while
        the peer still reads or writes it."""
        with self.pool.lock:
            self.block.usage = EXPORTED

    def __repr__(self):
        return f"Buffer({self.dtype.name}[{self.numel}] @ {self.ptr:#x})"


class ExternalBuffer:
    """Memory lazyfuse did not allocate (imported through DLPack), bound like a pooled Buffer.

    ``tensor`` is a flat torch view of the producer's memory and keeps it alive; nothing is
    ever returned to the pool. ``pool`` is the device's pool, from which backends take
    scratch copies of bound buffers (autotuning)."""

    __slots__ = ("pool", "dtype", "numel", "tensor", "__weakref__")

    def __init__(self, pool, dtype, flat):
        self.pool = pool
        self.dtype = dtype
        self.numel = flat.numel()
        self.tensor = flat

    @property
    def ptr(self) -> int:
        return self.tensor.data_ptr()

    def __repr__(self):
        return f"ExternalBuffer({self.dtype.name}[{self.numel}] @ {self.ptr:#x})"


class MemoryPool:
    def __init__(self, device_name: str, raw_alloc, stats):
        self.device_name = device_name
        self.raw_alloc = raw_alloc      # nbytes -> uint8 torch tensor
        self.stats = stats
        self.cached = defaultdict(list)
        self.private = None             # dict like ``cached`` while prepared for capture
        self.owner = None               # the thread that prepared it: the only one it serves
        self.epoch = 0                  # counts prepare() calls
        self.capturing = False
        self.cached_bytes = 0
        self.live_bytes = 0
        self.peak_live_bytes = 0
        self.lock = threading.RLock()

    # -- requests ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, usage: str = DATA, requester: str = "?", cause=None) -> Block:
        cls = size_class(nbytes)
        key = (usage, cls)
        with self.lock:
            if self.private is None:   # the steady state's path: a kept block of the class, if any
                free = self.cached.get(key)
                if free:
                    block = free.pop()
                    self.cached_bytes -= cls
                    self.stats.pooled_allocations += 1
                    block.epoch = 0
                    live = self.live_bytes = self.live_bytes + cls
                    if live > self.peak_live_bytes:
                        self.peak_live_bytes = live
                    return block
            block = None
            # the private segment serves the capturing thread only: another thread's upload must
            # neither take a block the capture run needs nor be refused as if it were part of it
            mine = self.private is not None and threading.get_ident() == self.owner
            if mine and self.private.get(key):
                block = self.private[key].pop()
            elif mine and self.capturing:
                detail = cause() if cause is not None else ""
                raise CaptureAllocationError(
                    f"capture needed a fresh {usage} allocation of {nbytes} bytes (size class {cls}) for "
                    f"{requester} on {self.device_name}, and the capture pool kept no such block. "
                    f"{detail}".rstrip())
            elif self.cached.get(key):
                block = self.cached[key].pop()
                self.cached_bytes -= cls
            if block is not None:
                self.stats.pooled_allocations += 1
            else:
                block = Block(cls, usage, self._fresh(cls, requester))
                self.stats.fresh_allocations += 1
            block.epoch = self.epoch if mine else 0
            self.live_bytes += cls
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
            return block

    def _fresh(self, nbytes: int, requester: str):
        """New memory; when the device refuses, free the cached blocks and try once more, then
        raise a DeviceError naming the size (nothing was launched yet: every live tensor is intact)."""
        try:
            return self.raw_alloc(nbytes)
        except (RuntimeError, MemoryError):
            self.empty_cache()
        try:
            return self.raw_alloc(nbytes)
        except (RuntimeError, MemoryError) as e:
            raise DeviceError(f"out of memory on {self.device_name}: {nbytes} bytes for {requester} "
                              f"({self.live_bytes} bytes live); drop or reuse tensors, or work in smaller "
                              f"pieces ({str(e).splitlines()[0][:200]})") from None

    def take_kept(self, specs) -> list:
        """For each of ``specs`` — (dtype, numel, (usage, size class)), a plan's new outputs and
        temporaries — a Buffer on a kept block, or None where none is kept, in one go: the steady
        state's drain, whose requests the blocks its last drain freed serve. Only outside a
        capture's prepared pool (whose requests ``alloc`` checks): there all None. The caller
        requests each None itself."""
        out = []
        with self.lock:
            if self.private is not None:
                return [None] * len(specs)
            cached = self.cached
            taken = served = 0
            for dtype, numel, key in specs:
                free = cached.get(key)
                if free:
                    block = free.pop()
                    block.epoch = 0
                    taken += block.nbytes
                    served += 1
                    out.append(Buffer(self, block, dtype, numel))
                else:
                    out.append(None)
            if served:
                self.cached_bytes -= taken
                self.stats.pooled_allocations += served
                live = self.live_bytes = self.live_bytes + taken
                if live > self.peak_live_bytes:
                    self.peak_live_bytes = live
        return out

    def buffer(self, dtype, numel: int, usage: str = DATA, requester: str = "?", cause=None) -> Buffer:
        block = self.alloc(max(numel, 1) * dtype.itemsize, usage, requester, cause)
        return Buffer(self, block, dtype, numel)

    def scratch_copies(self, bufs, requester: str, written=None) -> list:
        """Copies of ``bufs`` for autotuning: tuning never writes live data (an in-place kernel
        run N times would apply its update N times). ``written`` (one flag per buffer; None: all)
        says which the tuned code writes: the others it only reads, so they are bound as they are."""
        copies = []
        for k, b in enumerate(bufs):
            if written is not None and not written[k]:
                copies.append(b)
                continue
            c = self.buffer(b.dtype, b.numel, SCRATCH, requester)
            c.tensor.copy_(b.tensor)
            copies.append(c)
        return copies

    def release(self, block: Block) -> None:
        with self.lock:
            nbytes = block.nbytes
            self.live_bytes -= nbytes
            usage = block.usage
            if usage is EXPORTED:
                return
            if usage is SHARED:
                # graphs still hold it: only ever reused inside a capture that shares their pool
                if self.private is not None and self.capturing and block.epoch == self.epoch:
                    self.private[(DATA, nbytes)].append(block)
                return
            # only what was handed out since prepare() is kept for the capture: a block from
            # before (say, held by a lingering traceback) must not make a capture succeed by luck
            if self.private is not None and block.epoch == self.epoch:
                self.private[(usage, nbytes)].append(block)
            else:
                self.cached[(usage, nbytes)].append(block)
                self.cached_bytes += nbytes

    # -- capture modes ---------------------------------------------------------------------------
    def prepare(self) -> None:
        with self.lock:
            if self.private is None:
                self.private = defaultdict(list)
                self.owner = threading.get_ident()
                self.epoch += 1

    def begin_capture(self) -> None:
        with self.lock:
            self.capturing = True

    def lend(self, blocks) -> None:
        """Blocks of graphs whose pool the open capture shares (``lf.capture(pool=)``). They serve
        the capture run first — only it, not the warmup, whose results the program may keep —
        and never return to the shared cache: those graphs still replay on them."""
        with self.lock:
            for block in blocks:
                block.usage = SHARED
                block.epoch = self.epoch
                self.private[(DATA, block.nbytes)].append(block)

    def end_capture(self) -> None:
        """Back to normal mode (after a capture, failed or not)."""
        with self.lock:
            self.capturing = False
            if self.private is not None:
                for key, blocks in self.private.items():
                    kept = [b for b in blocks if b.usage is not SHARED]   # lent blocks: their graphs keep them
                    self.cached[key].extend(kept)
                    self.cached_bytes += key[1] * len(kept)
                self.private = None

    def empty_cache(self) -> None:
        with self.lock:
            self.cached.clear()
            self.cached_bytes = 0

    def info(self) -> dict:
        with self.lock:
            return {"live_bytes": self.live_bytes, "cached_bytes": self.cached_bytes,
                    "peak_live_bytes": self.peak_live_bytes, "persistent": self.private is not None,
                    "capturing": self.capturing}
