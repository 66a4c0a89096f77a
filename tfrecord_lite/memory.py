"""The process's memory for large records (README, "Bytes objects are reused too" and
"Large records and glibc"): glibc gives the memory of a freed batch of large values
back to the kernel, and the next batch faults every page of it in again. The compiled core
and the readers keep some for reuse, within bounds; ``release_memory`` gives it back now.
``tune_malloc`` keeps more in the process; opt-in, as the settings are the whole process's,
so tfrecord_lite never applies them itself.
"""

from __future__ import annotations

import os

__all__ = ["release_memory", "tune_malloc"]

# mallopt parameter numbers, from glibc's malloc.h; each setting's environment variable
# does the same from the start of a process.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_SETTINGS = {
    _M_TRIM_THRESHOLD: 256 << 20,  # MALLOC_TRIM_THRESHOLD_: give back free heap top past 256 MiB
    _M_MMAP_THRESHOLD: 32 << 20,   # MALLOC_MMAP_THRESHOLD_: blocks under 32 MiB from the heap
}
_ONE_ARENA = {_M_ARENA_MAX: 1}     # MALLOC_ARENA_MAX=1: every thread allocates from one arena


def tune_malloc(*, one_arena: bool = True) -> bool:
    """Keep the memory of freed batches in this process, where glibc would give it back to
    the kernel and fault it in again for the next batch: free memory at the top of the heap
    is given back only past 256 MiB (not 128 KiB), blocks under 32 MiB come from the heap
    (not fresh mmaps), and with ``one_arena`` every thread allocates from one arena (each
    reading thread's own arena would otherwise give back its memory the same way).

    The compiled core keeps most of this out of glibc's hands by itself: it reuses the bytes
    objects of values of 4 KiB and more, and shows glibc the size of each batch it decodes
    (its records' bytes, or its shorter values'), so that glibc keeps twice that (64 MiB at
    most) free at the top of each heap. On 32 KiB images (W1 in the README, 2 cores) a pass
    with 2 reading threads took 0.118-0.122 s by default and 0.119-0.126 s with these
    settings (0.126-0.163 s and 5,700-20,400 page faults by default before the objects were
    reused), and a DataLoader's main process gains nothing from them any more. In-memory
    batches of 1,024 W2 records parsed in the main thread took 294-321 us by default and
    291-297 us with them (450-518 us by default before the decoder showed glibc its
    batches). What they still keep: batches past 32 MiB. The process then holds on to up to
    256 MiB more than it uses, and threads contend for one arena, which costs little when
    they allocate few large blocks, as tfrecord_lite's readers do.

    The same as ``MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=33554432
    MALLOC_ARENA_MAX=1`` in the environment, for where that cannot be set (a notebook).
    Call it once, early, before threads start: an arena already made stays; workers that
    fork inherit it. Returns True when applied, False (changing nothing) where the C
    library is not glibc."""
    libc = glibc()
    if libc is None:
        return False
    for param, value in {**_SETTINGS, **(_ONE_ARENA if one_arena else {})}.items():
        if not libc.mallopt(param, value):
            raise OSError(f"glibc refused mallopt({param}, {value})")
    return True


def release_memory() -> None:
    """Give back the memory tfrecord_lite keeps in this process for the next batches: the
    compiled core's recycled output blocks (at most 128 MiB), the bytes objects no batch holds
    any more (of long values at most 128 MiB, of short ones 16 MiB, in each of its two modules
    that make them), and the read buffers shared by readers made without a pool (at most 64
    MiB). What is in use is not touched: batches, arrays and open readers go on as before,
    and the next batches allocate afresh. A dataset's own read buffers and mappings go with
    the dataset."""
    from . import _native
    from .reader import _shared_pool

    if "cython" in _native.available():
        core = _native._compiled  # filled by available()
        core["example"]._blocks_free()
        core["example"]._pool_clear()
        core["spans"]._pool_clear()
    _shared_pool.clear()


def glibc():
    """The C library through ctypes when it is glibc, else None (musl, macOS and Windows
    have no mallopt of these settings)."""
    if os.name != "posix":
        return None
    import ctypes

    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "gnu_get_libc_version") else None
