/* CRC32C (Castagnoli): hardware paths (SSE4.2, ARMv8 CRC) and a portable table path,
 * chosen once at run time. Compiled into tfrecord_lite._framing only, which owns the backend
 * state; tfrecord_lite._example borrows tfl_crc32c through a capsule (see csrc/crc32c.pxd). All functions are pure C and safe to call without the GIL. */
#ifndef TFRECORD_LITE_CRC32C_H
#define TFRECORD_LITE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Name of the capsule in which tfrecord_lite._framing exports tfl_crc32c. */
#define TFL_CRC32C_CAPSULE "tfrecord_lite._framing.crc32c"

enum tfl_crc_backend { TFL_CRC_TABLE = 0, TFL_CRC_SSE42 = 1, TFL_CRC_ARMV8 = 2 };

/* Extend crc (0 for a fresh checksum) over n bytes. */
uint32_t tfl_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's mask: rotate right by 15 and add 0xa282ead8. */
static inline uint32_t tfl_mask_crc(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
/* tfl_crc32c_init's choice: the fastest path the CPU has, the table path, or (for tests)
 * the hardware path without carry-less multiply (what an x86 CPU without PCLMULQDQ runs) or
 * with it but without 512-bit folds (what one without AVX-512 and VPCLMULQDQ runs). */
enum tfl_crc_path {
    TFL_CRC_PATH_BEST = 0, TFL_CRC_PATH_TABLE = 1, TFL_CRC_PATH_NO_CLMUL = 2, TFL_CRC_PATH_NO_FOLD = 3
};

/* Select a path (enum tfl_crc_path); returns the backend now active. */
int tfl_crc32c_init(int path);
/* Which backend is active (enum tfl_crc_backend). */
int tfl_crc32c_backend(void);
/* 1 if the active path joins its streams by carry-less multiply (x86 PCLMULQDQ), 2 if it also
 * folds long inputs 64 bytes at a time by 512-bit carry-less multiply (AVX-512 VPCLMULQDQ). */
int tfl_crc32c_clmul(void);
/* 1 if the CPU has a hardware path. */
int tfl_crc32c_hw_available(void);

#endif
