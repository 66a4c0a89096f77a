# Guarded reads of mapped files (csrc/guard.h). Only tfrecord_lite._framing links guard.c and so
# owns the SIGBUS handler; it exports enter and leave to other modules as a capsule named
# TFL_GUARD_CAPSULE (a tfl_guard_fns). mapped_kept: what of a batch's mapped blocks is not
# lost, for the decoder and split_records alike.
from libc.stdint cimport uintptr_t


cdef extern from "guard.h":
    ctypedef struct tfl_guard_fns:
        void (*enter)() noexcept nogil
        uintptr_t (*leave)() noexcept nogil
    int tfl_guard_install()
    void tfl_guard_enter() nogil
    uintptr_t tfl_guard_leave() nogil
    const tfl_guard_fns tfl_guard_functions
    const char *TFL_GUARD_CAPSULE


cdef inline list mapped_kept(owners, Py_buffer *views, Py_ssize_t n, uintptr_t fault, bint stat, mapped_type):
    """Per block of a batch (owners[b], acquired as views[b]): None, or for a mapped file (of
    type mapped_type) the bytes of it not lost (its ``lost()``), after marking there the fault
    at address fault when it lies in that block, and with stat the file's size now."""
    cdef Py_ssize_t b
    cdef uintptr_t buf
    kept = [None] * n
    for b in range(n):
        if type(owners[b]) is mapped_type:
            buf = <uintptr_t>views[b].buf
            kept[b] = owners[b].lost(
                <Py_ssize_t>(fault - buf) if buf <= fault < buf + <uintptr_t>views[b].len else -1, stat)
    return kept
