# CRC32C of csrc/crc32c.h. Only tfrecord_lite._framing links crc32c.c and so holds the
# backend state; it exports tfl_crc32c to other modules as a capsule named TFL_CRC32C_CAPSULE.
from libc.stdint cimport uint32_t


cdef extern from "crc32c.h":
    uint32_t tfl_crc32c(uint32_t crc, const void *data, size_t n) nogil
    uint32_t tfl_mask_crc(uint32_t crc) nogil
    int tfl_crc32c_init(int path) nogil
    int tfl_crc32c_backend() nogil
    int tfl_crc32c_clmul() nogil
    int tfl_crc32c_hw_available() nogil
    enum:
        TFL_CRC_PATH_BEST
        TFL_CRC_PATH_TABLE
        TFL_CRC_PATH_NO_CLMUL
        TFL_CRC_PATH_NO_FOLD
    const char *TFL_CRC32C_CAPSULE   # the capsule's name, for PyCapsule_New/GetPointer

ctypedef uint32_t (*crc32c_fn)(uint32_t crc, const void *data, size_t n) noexcept nogil

