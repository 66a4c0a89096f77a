/* Guarded reads of mapped files. A file mapped for reading (memory_map) that another process
 * truncates makes every read of its pages past the new end fault with SIGBUS, which ends the
 * process. While a thread is inside a guard (tfl_guard_enter .. tfl_guard_leave: the core's
 * scans and decodes), such a fault maps a page of zeros over the faulting page instead, and
 * the read goes on; tfl_guard_leave then gives the lowest address that faulted, so that the
 * caller raises an error about the lost records and hands out nothing made from the zeros.
 * The core reads a buffer in order, so no byte below that address was read from the zeros.
 * A fault outside a guard (the user's own reads of a view) goes to the handler that was
 * installed before, as if there were no guard.
 *
 * Compiled into tfrecord_lite._framing only, which owns the signal handler; the other
 * modules borrow the functions through a capsule (see csrc/guard.pxd). No-ops on Windows,
 * which does not let a mapped file be truncated. */
#ifndef TFRECORD_LITE_GUARD_H
#define TFRECORD_LITE_GUARD_H

#include <stdint.h>

#define TFL_GUARD_CAPSULE "tfrecord_lite._framing.guard"

/* Make sure this module's handler is the first one SIGBUS reaches (again, if another library
 * installed its own since); 0, or -1 with errno set. Call with the GIL held. */
int tfl_guard_install(void);
/* Enter a guard on this thread (guards nest). */
void tfl_guard_enter(void);
/* Leave it: the lowest address that faulted inside the outermost guard, or 0. */
uintptr_t tfl_guard_leave(void);

/* What the capsule holds. */
typedef struct {
    void (*enter)(void);
    uintptr_t (*leave)(void);
} tfl_guard_fns;
extern const tfl_guard_fns tfl_guard_functions;

#endif
