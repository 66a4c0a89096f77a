/* CRC32C with run-time dispatch: SSE4.2 crc32 on x86-64, the CRC extension on ARMv8,
 * slicing-by-8 tables everywhere else. */
#include "crc32c.h"
#include "le.h"

#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static uint32_t crc_shift256(uint32_t crc);
static int tables_ready = 0;

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    tables_ready = 1;
}

static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = crc ^ tfl_load_le32(p);
        uint32_t hi = tfl_load_le32(p + 4);
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
              table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
              table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_SSE42_PATH 1
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    /* Three independent streams hide the instruction's 3-cycle latency on long inputs. */
    while (n >= 3 * 256) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + 256;
        for (; p < end; p += 8) {
            uint64_t a, b, d;
            memcpy(&a, p, 8);
            memcpy(&b, p + 256, 8);
            memcpy(&d, p + 512, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        /* Shift c and c1 past the blocks that follow them, then fold. */
        c = crc_shift256(crc_shift256((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 512;
        n -= 3 * 256;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif
#define HAVE_ARMV8_PATH 1
__attribute__((target("+crc"))) static uint32_t crc_armv8(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = __crc32cb(crc, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        crc = __crc32cd(crc, v);
        p += 8;
        n -= 8;
    }
    while (n--) crc = __crc32cb(crc, *p++);
    return crc;
}
#endif

/* Multiplying by x^(8*256) mod P, as a table over each byte of crc: appending 256 zero
 * bytes to a message whose raw (pre-inversion) remainder is crc. */
static uint32_t shift256[4][256];

static uint32_t gf2_multiply_xpow(uint32_t crc, size_t zero_bytes) {
    /* Append zero bytes bit by bit; only used to build shift256 once. */
    for (size_t i = 0; i < zero_bytes * 8; i++) crc = (crc >> 1) ^ (POLY & (0u - (crc & 1u)));
    return crc;
}

static void build_shift256(void) {
    for (int b = 0; b < 4; b++)
        for (uint32_t i = 0; i < 256; i++) shift256[b][i] = gf2_multiply_xpow(i << (8 * b), 256);
}

static uint32_t crc_shift256(uint32_t crc) {
    return shift256[0][crc & 0xff] ^ shift256[1][(crc >> 8) & 0xff] ^ shift256[2][(crc >> 16) & 0xff] ^
           shift256[3][crc >> 24];
}

typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t);
static crc_fn active = crc_table;
static int active_backend = TFL_CRC_TABLE;

int tfl_crc32c_hw_available(void) {
#if defined(HAVE_SSE42_PATH)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#elif defined(HAVE_ARMV8_PATH) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#elif defined(HAVE_ARMV8_PATH) && defined(__APPLE__)
    return 1;
#else
    return 0;
#endif
}

int tfl_crc32c_init(int force_table) {
    if (!tables_ready) {
        build_tables();
        build_shift256();
    }
    active = crc_table;
    active_backend = TFL_CRC_TABLE;
    if (!force_table && tfl_crc32c_hw_available()) {
#if defined(HAVE_SSE42_PATH)
        active = crc_sse42;
        active_backend = TFL_CRC_SSE42;
#elif defined(HAVE_ARMV8_PATH)
        active = crc_armv8;
        active_backend = TFL_CRC_ARMV8;
#endif
    }
    return active_backend;
}

int tfl_crc32c_backend(void) { return active_backend; }

uint32_t tfl_crc32c(uint32_t crc, const void *data, size_t n) {
    return ~active(~crc, (const unsigned char *)data, n);
}
