# Guarded reads of mapped files (csrc/guard.h). Only tfrecord_lite._framing links guard.c and so
# owns the SIGBUS handler; it exports enter and leave to other modules as a capsule named
# TFL_GUARD_CAPSULE (a tfl_guard_fns).
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
