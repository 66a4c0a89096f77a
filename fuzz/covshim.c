/* Route atheris' Python coverage past gcc's AddressSanitizer runtime.
 *
 * A gcc ASan build of the extensions needs libasan preloaded ahead of everything else.
 * libasan defines weak no-op stubs of the SanitizerCoverage callbacks, and because it is
 * first in the global lookup scope, atheris' libFuzzer would register its Python coverage
 * counters with those stubs and fuzz blind. Preloaded before libasan, this library defines
 * the callbacks atheris uses and forwards each to libFuzzer's copy inside atheris'
 * core_with_libfuzzer module, found once it is loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

static void *fuzzer_lib;

static int find_fuzzer(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name && strstr(info->dlpi_name, "atheris/core_with_libfuzzer")) {
        fuzzer_lib = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
        return 1;
    }
    return 0;
}

static void *target(const char *name) {
    if (!fuzzer_lib)
        dl_iterate_phdr(find_fuzzer, NULL);
    return fuzzer_lib ? dlsym(fuzzer_lib, name) : NULL;
}

/* Each forwarder looks its target up once; before atheris loads libFuzzer it does nothing. */
#define FORWARD2(name, A, B)                                   \
    void name(A a, B b) {                                      \
        static void (*fn)(A, B);                               \
        if (!fn) fn = (void (*)(A, B))target(#name);           \
        if (fn) fn(a, b);                                      \
    }
#define FORWARD1(name, A)                                      \
    void name(A a) {                                           \
        static void (*fn)(A);                                  \
        if (!fn) fn = (void (*)(A))target(#name);              \
        if (fn) fn(a);                                         \
    }

FORWARD2(__sanitizer_cov_8bit_counters_init, uint8_t *, uint8_t *)
FORWARD2(__sanitizer_cov_pcs_init, const uintptr_t *, const uintptr_t *)
FORWARD2(__sanitizer_cov_trace_cmp1, uint8_t, uint8_t)
FORWARD2(__sanitizer_cov_trace_cmp2, uint16_t, uint16_t)
FORWARD2(__sanitizer_cov_trace_cmp4, uint32_t, uint32_t)
FORWARD2(__sanitizer_cov_trace_cmp8, uint64_t, uint64_t)
FORWARD2(__sanitizer_cov_trace_const_cmp1, uint8_t, uint8_t)
FORWARD2(__sanitizer_cov_trace_const_cmp2, uint16_t, uint16_t)
FORWARD2(__sanitizer_cov_trace_const_cmp4, uint32_t, uint32_t)
FORWARD2(__sanitizer_cov_trace_const_cmp8, uint64_t, uint64_t)
FORWARD2(__sanitizer_cov_trace_switch, uint64_t, uint64_t *)
FORWARD1(__sanitizer_cov_trace_div4, uint32_t)
FORWARD1(__sanitizer_cov_trace_div8, uint64_t)
FORWARD1(__sanitizer_cov_trace_gep, uintptr_t)
FORWARD1(__sanitizer_cov_trace_pc_indir, uintptr_t)
