/* Large blocks for a batch's output buffers (see _example_columns.pxi, "recycled blocks"). */
#ifndef TFRECORD_LITE_BLOCKS_H
#define TFRECORD_LITE_BLOCKS_H

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* n bytes; from 4 MiB on, in huge pages where the kernel gives them on request, as numpy
   asks for its own large arrays (fewer pages to fault in and to look up). */
static void *tfl_block_alloc(size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    void *p = NULL;
    if (n >= ((size_t)4 << 20) && posix_memalign(&p, (size_t)2 << 20, n) == 0) {
        madvise(p, n & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(n);
}

#endif
