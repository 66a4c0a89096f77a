/* CRC32C with run-time dispatch: SSE4.2 crc32 on x86-64 (with carry-less multiply where the
 * CPU has it, and 512-bit carry-less folds where it has AVX-512 and VPCLMULQDQ), the CRC
 * extension on ARMv8, slicing-by-8 tables everywhere else. */
#include "crc32c.h"
#include "le.h"

#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static int tables_ready = 0;

/* Appending b zero bytes to a message whose raw (pre-inversion) remainder is crc multiplies
 * it by x^(8b) mod P: a linear map, kept as a table over each byte of crc. The hardware
 * paths compute three blocks of b bytes as independent streams and join them with it. */
typedef uint32_t shift_table[4][256];
static shift_table shift64, shift256, shift4096;

/* x^n mod P (bit-reflected, as the CRC registers hold it): a * b mod P by shift and add,
 * x^n by squaring. Only for the constants below, made once. */
static uint32_t mult_mod_p(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = (b >> 1) ^ (POLY & (0u - (b & 1u)));
    }
    return p;
}

static uint32_t x_pow_mod_p(uint64_t n) {
    uint32_t p = 1u << 31, square = 1u << 30;   /* x^0, x^1 */
    for (; n; n >>= 1) {
        if (n & 1)
            p = mult_mod_p(square, p);
        square = mult_mod_p(square, square);
    }
    return p;
}

/* The carry-less path's joins, per stream length of w 8-byte words (1 <= w <= JOIN_WORDS). A
 * stream's CRC is moved past the k words after it (2w + 1 for the first stream, w + 1 for the
 * second) by a carry-less multiplication by x^(64k - 33): 32 of the 33 are the x^32 that the
 * crc32 instruction which takes the product (XORed into the word after the third stream)
 * multiplies by, and 1 the bit a product of two reflected 32-bit values is shifted by. */
#define JOIN_WORDS 32
static uint32_t join_first[JOIN_WORDS + 1], join_second[JOIN_WORDS + 1];

/* The folding path's constants, per 128-bit lane moved d bits on (see fold_blocks): the low
 * qword multiplies the lane's first 8 bytes by x^(d + 64), the high qword its last 8 by x^d.
 * Multiplying by x^e is done with x^(e - 1) mod P in the top 32 bits (the 1 again the shift
 * of a reflected product). */
enum { FOLD_4X512, FOLD_3X512, FOLD_2X512, FOLD_512, FOLD_384, FOLD_256, FOLD_128, FOLD_DISTANCES };
static const unsigned fold_bits[FOLD_DISTANCES] = {2048, 1536, 1024, 512, 384, 256, 128};
static uint64_t fold_k[FOLD_DISTANCES][2];

static inline uint32_t crc_shift(const shift_table t, uint32_t crc) {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    for (int w = 1; w <= JOIN_WORDS; w++) {
        join_first[w] = x_pow_mod_p(64 * (uint64_t)(2 * w + 1) - 33);
        join_second[w] = x_pow_mod_p(64 * (uint64_t)(w + 1) - 33);
    }
    for (int i = 0; i < FOLD_DISTANCES; i++) {
        fold_k[i][0] = (uint64_t)x_pow_mod_p(fold_bits[i] + 63) << 32;
        fold_k[i][1] = (uint64_t)x_pow_mod_p(fold_bits[i] - 1) << 32;
    }
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

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The hardware paths, given their 8-byte CRC instruction STEP8 (on local c, p and n): whole
 * rounds of three blocks of `block` bytes as three independent streams, which hide the
 * instruction's latency, joined by shifting the first two past the blocks after them. */
#define CRC_ROUNDS(STEP8, block, shift)                          \
    while (n >= 3 * (size_t)(block)) {                           \
        uint32_t c1 = 0, c2 = 0;                                 \
        const unsigned char *end = p + (block);                  \
        for (; p < end; p += 8) {                                \
            c = STEP8(c, load64(p));                             \
            c1 = STEP8(c1, load64(p + (block)));                 \
            c2 = STEP8(c2, load64(p + 2 * (block)));             \
        }                                                        \
        c = crc_shift(shift, crc_shift(shift, c) ^ c1) ^ c2;     \
        p += 2 * (block);                                        \
        n -= 3 * (size_t)(block);                                \
    }
/* Long blocks where they fit, so that joins are rare; 64-byte blocks still take records of
 * a few hundred bytes (a tabular Example) three streams at a time. */
#define CRC_ALL_ROUNDS(STEP8)                \
    CRC_ROUNDS(STEP8, 4096, shift4096)       \
    CRC_ROUNDS(STEP8, 256, shift256)         \
    CRC_ROUNDS(STEP8, 64, shift64)
/* A hardware path: single bytes to an 8-byte boundary, the rounds, 8-byte words, the rest. */
#define CRC_HW_PATH(name, target, STEP1, STEP8)                                \
    target static uint32_t name(uint32_t c, const unsigned char *p, size_t n) { \
        for (; n && ((uintptr_t)p & 7); n--) c = STEP1(c, *p++);               \
        CRC_ALL_ROUNDS(STEP8)                                                  \
        for (; n >= 8; p += 8, n -= 8) c = STEP8(c, load64(p));                \
        while (n--) c = STEP1(c, *p++);                                        \
        return c;                                                              \
    }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <wmmintrin.h>
#define HAVE_SSE42_PATH 1
#define SSE42_STEP8(c, v) ((uint32_t)_mm_crc32_u64((c), (v)))
CRC_HW_PATH(crc_sse42, __attribute__((target("sse4.2"))), _mm_crc32_u8, SSE42_STEP8)

#define CLMUL_TARGET __attribute__((target("sse4.2,pclmul")))

/* 1 if the CPU has carry-less multiply (PCLMULQDQ) beside SSE4.2. */
static int clmul_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") ? 1 : 0;
}

CLMUL_TARGET static inline uint64_t clmul32(uint32_t a, uint32_t b) {
    __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
    return (uint64_t)_mm_cvtsi128_si64(product);
}

/* SSE4.2 with carry-less multiply. A record of a few hundred bytes (a tabular Example) is
 * cut into three streams of equal length whatever its size, joined by two multiplications:
 * the table joins of fixed 64-byte blocks left up to 191 bytes to one stream, and the bytes
 * before an 8-byte boundary went one at a time (x86 loads need no alignment). In a loop over
 * records in the L2 cache: 455 bytes in 19.7 ns against 26.4, 700 in 28.0 against 43.5, a
 * frame's 8-byte length in 3.3 against 4.6. Long inputs keep the 4096-byte rounds, whose
 * table joins are rare. */
CLMUL_TARGET static uint32_t crc_sse42_clmul(uint32_t c, const unsigned char *p, size_t n) {
    CRC_ROUNDS(SSE42_STEP8, 4096, shift4096)
    while (n >= 32) {
        size_t w = (n - 8) / 24;   /* words a stream: three streams, then the join's word */
        if (w > JOIN_WORDS)
            w = JOIN_WORDS;
        const size_t len = 8 * w;
        uint32_t c1 = 0, c2 = 0;
        for (const unsigned char *end = p + len; p < end; p += 8) {
            c = SSE42_STEP8(c, load64(p));
            c1 = SSE42_STEP8(c1, load64(p + len));
            c2 = SSE42_STEP8(c2, load64(p + 2 * len));
        }
        p += 2 * len;
        c = SSE42_STEP8(c2, load64(p) ^ clmul32(c, join_first[w]) ^ clmul32(c1, join_second[w]));
        p += 8;
        n -= 3 * len + 8;
    }
    for (; n >= 8; p += 8, n -= 8)
        c = SSE42_STEP8(c, load64(p));
    if (n & 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        c = _mm_crc32_u32(c, v);
        p += 4;
    }
    if (n & 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        c = _mm_crc32_u16(c, v);
        p += 2;
    }
    if (n & 1)
        c = _mm_crc32_u8(c, *p);
    return c;
}

/* Compilers that know the AVX-512 and VPCLMULQDQ intrinsics and target names (Apple numbers
 * its clang releases apart: its 11 is LLVM's 8). */
#if defined(__apple_build_version__)
#define FOLD_COMPILER (__clang_major__ >= 11)
#elif defined(__clang__)
#define FOLD_COMPILER (__clang_major__ >= 8)
#else
#define FOLD_COMPILER (__GNUC__ >= 8)
#endif
#if FOLD_COMPILER
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_FOLD_PATH 1
#define FOLD_TARGET __attribute__((target("sse4.2,pclmul,avx512f,vpclmulqdq")))
#define FOLD_MIN 256   /* shorter inputs run the carry-less path as fast or faster */

/* 1 if the CPU (and the OS, for the 512-bit registers) has AVX-512 and VPCLMULQDQ. The
 * avx512f check covers the OS too; VPCLMULQDQ is read from CPUID (leaf 7, ECX bit 10) by
 * number, since only newer compilers' __builtin_cpu_supports know its name. */
static int fold_available(void) {
    unsigned int a, b, c, d;
    __builtin_cpu_init();
    if (!clmul_available() || !__builtin_cpu_supports("avx512f") || __get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    (void)a, (void)b, (void)d;
    return (c >> 10) & 1;
}

FOLD_TARGET static inline __m512i fold_load(int distance) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)fold_k[distance]));
}

/* x's four 128-bit lanes moved on by k's distance, XORed with next. */
FOLD_TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96);
}

FOLD_TARGET static inline __m128i fold128(__m128i x, int distance, __m128i next) {
    const __m128i k = _mm_loadu_si128((const __m128i *)fold_k[distance]);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

/* AVX-512 with VPCLMULQDQ: the crc32 instruction takes 8 bytes a cycle whatever the streams,
 * while a 512-bit carry-less multiply pair moves 64 bytes. Here n (a multiple of 64, at least
 * 256) bytes: four registers of 64 bytes (the first with the CRC so far XORed in) are each
 * multiplied forward past the 256 bytes after them and XORed into those; at the end the four
 * are folded into one, which goes on 64 bytes at a time, its lanes are folded into one
 * 128-bit lane, and two crc32 instructions reduce that (as they reduce any 16 bytes). */
FOLD_TARGET static uint32_t fold_blocks(uint32_t c, const unsigned char *p, size_t n) {
    __m512i x = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_castsi128_si512(_mm_cvtsi32_si128((int)c)));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    const __m512i k = fold_load(FOLD_4X512);
    for (; n >= 256; p += 256, n -= 256) {
        x = fold512(x, k, _mm512_loadu_si512(p));
        x1 = fold512(x1, k, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k, _mm512_loadu_si512(p + 192));
    }
    const __m512i zero = _mm512_setzero_si512();
    x = _mm512_ternarylogic_epi64(fold512(x, fold_load(FOLD_3X512), x3), fold512(x1, fold_load(FOLD_2X512), zero),
                                  fold512(x2, fold_load(FOLD_512), zero), 0x96);
    for (const __m512i k512 = fold_load(FOLD_512); n; p += 64, n -= 64)
        x = fold512(x, k512, _mm512_loadu_si512(p));
    __m128i lane = _mm512_extracti32x4_epi32(x, 3);
    lane = fold128(_mm512_castsi512_si128(x), FOLD_384, lane);
    lane = fold128(_mm512_extracti32x4_epi32(x, 1), FOLD_256, lane);
    lane = fold128(_mm512_extracti32x4_epi32(x, 2), FOLD_128, lane);
    c = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(lane, 1));
}

/* The carry-less path with inputs from FOLD_MIN bytes folded first, all but their last n % 64
 * bytes. Records in L2 (-O3): 32 KiB in 561 ns against 1,293 (58 against 25 GB/s), 455 bytes
 * in 13.1 against 19.7 ns, 1,000 in 25.0 against 40.4; a frame's 8-byte length as before (a
 * test and a branch: only fold_blocks touches the 512-bit registers). */
CLMUL_TARGET static uint32_t crc_fold(uint32_t c, const unsigned char *p, size_t n) {
    if (n >= FOLD_MIN) {
        const size_t folded = n & ~(size_t)63;
        c = fold_blocks(c, p, folded);
        p += folded;
        n -= folded;
    }
    return crc_sse42_clmul(c, p, n);
}
#endif
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
CRC_HW_PATH(crc_armv8, __attribute__((target("+crc"))), __crc32cb, __crc32cd)
#endif

/* t: `times` applications of the map `by`, or of appending one zero byte where by is NULL,
 * found for the 32 basis vectors and combined per byte. */
static void build_shift(shift_table t, const shift_table by, int times) {
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) {
        uint32_t c = 1u << bit;
        for (int j = 0; j < times; j++) {
            if (by) {
                c = crc_shift(by, c);
            } else {
                for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
            }
        }
        basis[bit] = c;
    }
    for (int b = 0; b < 4; b++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++)
                if ((i >> k) & 1u) v ^= basis[8 * b + k];
            t[b][i] = v;
        }
}

typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t);
static crc_fn active = crc_table;
static int active_backend = TFL_CRC_TABLE;
static int active_clmul = 0;

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

int tfl_crc32c_init(int path) {
    if (!tables_ready) {
        build_tables();
        build_shift(shift64, NULL, 64);
        build_shift(shift256, shift64, 4);
        build_shift(shift4096, shift256, 16);
    }
    active = crc_table;
    active_backend = TFL_CRC_TABLE;
    active_clmul = 0;
    if (path != TFL_CRC_PATH_TABLE && tfl_crc32c_hw_available()) {
#if defined(HAVE_SSE42_PATH)
        active = crc_sse42;
        active_backend = TFL_CRC_SSE42;
        if (path != TFL_CRC_PATH_NO_CLMUL && clmul_available()) {
            active = crc_sse42_clmul;
            active_clmul = 1;
#if defined(HAVE_FOLD_PATH)
            if (path != TFL_CRC_PATH_NO_FOLD && fold_available()) {
                active = crc_fold;
                active_clmul = 2;
            }
#endif
        }
#elif defined(HAVE_ARMV8_PATH)
        active = crc_armv8;
        active_backend = TFL_CRC_ARMV8;
#endif
    }
    return active_backend;
}

int tfl_crc32c_backend(void) { return active_backend; }

int tfl_crc32c_clmul(void) { return active_clmul; }

uint32_t tfl_crc32c(uint32_t crc, const void *data, size_t n) {
    return ~active(~crc, (const unsigned char *)data, n);
}
