/* Little-endian loads and stores: the TFRecord and protobuf wire formats are little-endian
 * whatever the host. TFL_LITTLE_ENDIAN is 1 on a little-endian host, where a native copy of
 * float32 values is already in wire order. */
#ifndef TFRECORD_LITE_LE_H
#define TFRECORD_LITE_LE_H

#include <stdint.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TFL_LITTLE_ENDIAN 0
#else
#define TFL_LITTLE_ENDIAN 1   /* gcc/clang say otherwise; MSVC targets are all little-endian */
#endif

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
