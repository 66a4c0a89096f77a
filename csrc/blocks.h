/* Recycled blocks for a batch's large output buffers (see _example_columns.pxi, "large
   outputs in recycled blocks") and the encoder's scratch (_example_encode.pxi). A block of
   TFL_BLOCK_MIN bytes or more whose array is gone is kept, up to TFL_BLOCK_SLOTS blocks and
   TFL_BLOCK_KEEP bytes, and handed to the next request it fits. Both ends may run without the
   GIL (a column growing while records are decoded), so a lock guards the slots; after a fork
   the child gets a lock of its own. */
#ifndef TFRECORD_LITE_BLOCKS_H
#define TFRECORD_LITE_BLOCKS_H

#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <pthread.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define TFL_BLOCK_MIN ((size_t)1 << 20)   /* smaller buffers: glibc's heap reuses them itself */
#define TFL_BLOCK_SLOTS 16
#define TFL_BLOCK_KEEP ((size_t)128 << 20)

static void *tfl_block_data[TFL_BLOCK_SLOTS];
static size_t tfl_block_size[TFL_BLOCK_SLOTS];
static int tfl_blocks_kept;

#if defined(_WIN32)
static SRWLOCK tfl_block_lock = SRWLOCK_INIT;
static void tfl_blocks_lock(void) { AcquireSRWLockExclusive(&tfl_block_lock); }
static void tfl_blocks_unlock(void) { ReleaseSRWLockExclusive(&tfl_block_lock); }
#else
static pthread_mutex_t tfl_block_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t tfl_block_once = PTHREAD_ONCE_INIT;
static void tfl_blocks_unlock(void) { pthread_mutex_unlock(&tfl_block_lock); }
static void tfl_blocks_prepare(void) { pthread_mutex_lock(&tfl_block_lock); }
static void tfl_blocks_at_fork(void) { pthread_atfork(tfl_blocks_prepare, tfl_blocks_unlock, tfl_blocks_unlock); }
static void tfl_blocks_lock(void) {
    pthread_once(&tfl_block_once, tfl_blocks_at_fork);   /* held across fork(): never */
    pthread_mutex_lock(&tfl_block_lock);
}
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

/* A kept block of n to 1.25 n bytes (the smallest), else a new one with room for a next
   batch 1/8 larger; its size in *size. NULL when out of memory. */
static void *tfl_block_take(size_t n, size_t *size) {
    int i, best = -1;
    void *p;
    tfl_blocks_lock();
    for (i = 0; i < tfl_blocks_kept; i++) {
        if (n <= tfl_block_size[i] && tfl_block_size[i] <= n + n / 4
                && (best < 0 || tfl_block_size[i] < tfl_block_size[best]))
            best = i;
    }
    if (best >= 0) {
        p = tfl_block_data[best];
        *size = tfl_block_size[best];
        tfl_blocks_kept--;
        tfl_block_data[best] = tfl_block_data[tfl_blocks_kept];
        tfl_block_size[best] = tfl_block_size[tfl_blocks_kept];
        tfl_blocks_unlock();
        return p;
    }
    tfl_blocks_unlock();
    *size = n + n / 8;
    return tfl_block_alloc(*size);
}

/* Memory of size bytes is no longer used. Under TFL_BLOCK_MIN (malloc'd, never a block) it
   is freed; a block is kept, or when the slots or the byte budget are full, the smaller of it
   and the smallest kept is freed. */
static void tfl_block_give(void *p, size_t size) {
    int i, small = 0;
    size_t held = size;
    void *drop = p;
    if (size < TFL_BLOCK_MIN) {
        free(p);
        return;
    }
    tfl_blocks_lock();
    for (i = 0; i < tfl_blocks_kept; i++) {
        held += tfl_block_size[i];
        if (tfl_block_size[i] < tfl_block_size[small])
            small = i;
    }
    if (tfl_blocks_kept < TFL_BLOCK_SLOTS && held <= TFL_BLOCK_KEEP) {
        tfl_block_data[tfl_blocks_kept] = p;
        tfl_block_size[tfl_blocks_kept] = size;
        tfl_blocks_kept++;
        drop = NULL;
    } else if (tfl_blocks_kept && tfl_block_size[small] < size && held - tfl_block_size[small] <= TFL_BLOCK_KEEP) {
        drop = tfl_block_data[small];
        tfl_block_data[small] = p;
        tfl_block_size[small] = size;
    }
    tfl_blocks_unlock();
    free(drop);
}

/* The kept blocks, for tests: up to max of them into data and size; returns how many. */
static int tfl_blocks_list(void **data, size_t *size, int max) {
    int i, n;
    tfl_blocks_lock();
    n = tfl_blocks_kept < max ? tfl_blocks_kept : max;
    for (i = 0; i < n; i++) {
        data[i] = tfl_block_data[i];
        size[i] = tfl_block_size[i];
    }
    tfl_blocks_unlock();
    return n;
}

/* Free every kept block. */
static void tfl_blocks_free(void) {
    int i;
    tfl_blocks_lock();
    for (i = 0; i < tfl_blocks_kept; i++)
        free(tfl_block_data[i]);
    tfl_blocks_kept = 0;
    tfl_blocks_unlock();
}

#endif
