# Little-endian loads/stores of csrc/le.h, and whether the host is little-endian.
from libc.stdint cimport uint32_t, uint64_t


cdef extern from "le.h":
    const bint TFL_LITTLE_ENDIAN
    uint64_t tfl_load_le64(const unsigned char *p) nogil
    uint32_t tfl_load_le32(const unsigned char *p) nogil
    void tfl_store_le64(unsigned char *p, uint64_t v) nogil
    void tfl_store_le32(unsigned char *p, uint32_t v) nogil
