"""The process's malloc settings for large records (README, "Large records and glibc"):
glibc gives the memory of a freed batch of large values back to the kernel, and the next
batch faults every page of it in again. ``tune_malloc`` keeps that memory in the process.
Opt-in: the settings are the whole process's, so tfrecord_lite never applies them itself.
"""

from __future__ import annotations

import os

__all__ = ["tune_malloc"]

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

    On 32 KiB images (W1 in the README, 2 cores) a pass with 2 reading threads took
    0.118-0.126 s with almost no page faults, against 0.126-0.163 s and 5,700-20,400 faults
    without (one thread: 0.19-0.22 s). The process then holds on to up to
    256 MiB more than it uses, and threads contend for one arena, which costs little when
    they allocate few large blocks, as tfrecord_lite's readers do.

    The same as ``MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=33554432
    MALLOC_ARENA_MAX=1`` in the environment, for where that cannot be set (a notebook).
    Call it once, early, before threads start: an arena already made stays. With a
    DataLoader, call it in the main process, which turns the workers' bytes values back
    into objects (on W1, 2 workers gave 0.68-0.82x of none without it and 1.00-1.07x with
    it; in the workers alone it changed nothing); workers that fork inherit it. Without it,
    the compiled core still shows glibc the size of a batch of large bytes values, so that
    glibc keeps twice that (64 MiB at most) free at the top of each heap; these settings
    keep more, in one heap. Returns True when applied, False (changing nothing) where the C
    library is not glibc."""
    libc = glibc()
    if libc is None:
        return False
    for param, value in {**_SETTINGS, **(_ONE_ARENA if one_arena else {})}.items():
        if not libc.mallopt(param, value):
            raise OSError(f"glibc refused mallopt({param}, {value})")
    return True


def glibc():
    """The C library through ctypes when it is glibc, else None (musl, macOS and Windows
    have no mallopt of these settings)."""
    if os.name != "posix":
        return None
    import ctypes

    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "gnu_get_libc_version") else None
