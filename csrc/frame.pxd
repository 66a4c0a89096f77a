# TFRecord frame sizes, the one C spelling of them (FORMAT.md: "Frame"). The framing
# modules export them to Python as HEADER_BYTES, FOOTER_BYTES and OVERHEAD_BYTES.

cdef enum:
    FRAME_HEADER = 12    # uint64 length + uint32 masked CRC of it
    FRAME_FOOTER = 4     # uint32 masked CRC of the data
    FRAME_OVERHEAD = FRAME_HEADER + FRAME_FOOTER
