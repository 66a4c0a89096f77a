/* CRC32C (Castagnoli): hardware paths (SSE4.2, ARMv8 CRC) and a portable table path,
 * chosen once at run time. All functions are pure C and safe to call without the GIL. */
#ifndef TFRECORD_LITE_CRC32C_H
#define TFRECORD_LITE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

enum tfl_crc_backend { TFL_CRC_TABLE = 0, TFL_CRC_SSE42 = 1, TFL_CRC_ARMV8 = 2 };

/* Extend crc (0 for a fresh checksum) over n bytes. */
uint32_t tfl_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's mask: rotate right by 15 and add 0xa282ead8. */
static inline uint32_t tfl_mask_crc(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
/* Pick the fastest backend the CPU has; force_table=1 selects the table path. */
int tfl_crc32c_init(int force_table);
/* Which backend is active (enum tfl_crc_backend). */
int tfl_crc32c_backend(void);
/* 1 if the CPU has a hardware path. */
int tfl_crc32c_hw_available(void);

/* Little-endian loads/stores; the format is little-endian whatever the host. */
static inline uint64_t tfl_load_le64(const unsigned char *p) {
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}
static inline uint32_t tfl_load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void tfl_store_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void tfl_store_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

#endif
