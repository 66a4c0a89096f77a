# Included by _framing.pyx: the files and memory the reader reads, namely reads verified as
# they land (read_spans, with _framing.pyx's scan), uninitialized read buffers, read-only
# file mappings, and the int32 words two processes share.


cdef extern from *:
    """
    #if defined(_WIN32)
    #include <errno.h>
    static Py_ssize_t tfl_pread(int fd, void *buf, Py_ssize_t n, int64_t offset) {
        (void)fd; (void)buf; (void)n; (void)offset; errno = ENOSYS; return -1;
    }
    #else
    #include <unistd.h>
    static Py_ssize_t tfl_pread(int fd, void *buf, Py_ssize_t n, int64_t offset) {
        return (Py_ssize_t)pread(fd, buf, (size_t)n, (off_t)offset);
    }
    #endif
    """
    Py_ssize_t tfl_pread(int fd, void *buf, Py_ssize_t n, int64_t offset) nogil


def read_spans(int fd, bytearray buf, Py_ssize_t pos, Py_ssize_t filled, int64_t offset, Py_ssize_t step,
               bint check_crc=True, uint64_t max_record_bytes=0xFFFFFFFFFFFFFFFF):
    """Read the file open as fd into buf, verifying its frames as they land: buf[:filled] was
    read before (its frames from pos on not yet verified), and buf[filled] is the file's byte
    at offset. Reads of up to step bytes (or what the unfinished frame needs), each verified
    at once while in cache, until buf is full, the file ends or a frame is bad: one call and
    one GIL release where a read and a scan of each chunk took one each, and on 16 threads
    each wait to retake it. Returns (starts, lengths, pos, filled, status, value, eof): as
    scan_spans, with the bytes now in buf and whether the file ended. A failed read raises
    OSError when no frame came before it (else the next call meets it)."""
    cdef Py_buffer view
    cdef Cursor c
    cdef Span batch[SPAN_BATCH]
    cdef Span *spans = batch
    cdef Py_ssize_t found = 0, cap = SPAN_BATCH, size, want, got
    cdef uint64_t value = 0
    cdef int status = OK, err = 0
    cdef bint eof = False
    cdef unsigned char *base
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)  # buf cannot be resized meanwhile
    try:
        size, base = view.len, <unsigned char *>view.buf
        if not (0 <= pos <= filled <= size and step > 0 and offset >= 0):
            raise InvalidArgumentError(f"read_spans: pos {pos}, filled {filled}, step {step} and offset {offset} "
                                       f"do not fit a buffer of {size} bytes")
        cursor_init(&c, base + pos, filled - pos)
        with nogil:
            while True:
                status = _scan_all(&c, base, check_crc, max_record_bytes, -1, batch, &spans, &cap, &found, &value)
                if status != OK or filled == size:
                    break
                want = size - filled
                if step < want and value < <uint64_t>want:
                    want = max(step, <Py_ssize_t>value)
                got = tfl_pread(fd, base + filled, want, offset)
                if got < 0:
                    err = errno
                    if err == EINTR:
                        err = 0
                        continue
                    break
                if got == 0:
                    eof = True
                    break
                filled += got
                offset += got
                c.end = base + filled
        if status < 0:
            raise MemoryError()
        if err and not found:
            raise OSError(err, os.strerror(err))
        return *_span_arrays(spans, found), c.pos - base, filled, status, value, eof
    finally:
        PyBuffer_Release(&view)
        if spans != batch:
            free(spans)


def new_buffer(Py_ssize_t n):
    """A bytearray of n bytes left uninitialized (the reader fills it at once)."""
    if n < 0:
        raise InvalidArgumentError("n must be >= 0")
    return PyByteArray_FromStringAndSize(NULL, n)


cdef extern from *:
    """
    #if defined(_WIN32)
    #include <errno.h>
    static void *tfl_map_read(int fd, Py_ssize_t size) { (void)fd; (void)size; errno = ENOSYS; return NULL; }
    static void tfl_unmap(void *p, Py_ssize_t size) { (void)p; (void)size; }
    #else
    #include <sys/mman.h>
    /* A read-only shared mapping of a whole file; read ahead as a sequential scan does. */
    static void *tfl_map_read(int fd, Py_ssize_t size) {
        void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return NULL;
        (void)madvise(p, (size_t)size, MADV_SEQUENTIAL);
        return p;
    }
    static void tfl_unmap(void *p, Py_ssize_t size) { munmap(p, (size_t)size); }
    #endif
    """
    void *tfl_map_read(int fd, Py_ssize_t size) nogil
    void tfl_unmap(void *p, Py_ssize_t size) nogil


cdef extern from "pythread.h":
    unsigned long PyThread_start_new_thread(void (*)(void *) noexcept nogil, void *)
    unsigned long PYTHREAD_INVALID_THREAD_ID


cdef enum:
    UNMAP_LATER_BYTES = 8 << 20  # smaller mappings unmap faster than a thread starts


cdef struct _Unmapping:
    void *addr
    Py_ssize_t size


cdef void _unmap_later(void *arg) noexcept nogil:
    cdef _Unmapping *later = <_Unmapping *>arg
    tfl_unmap(later.addr, later.size)
    free(later)


cdef class _MappedFile:
    """A file's bytes mapped read-only: a bytes-like that holds no descriptor and is unmapped
    when the last view of it goes. Pickles as the bytes it holds. ``path``: the file's, if
    given, to tell a truncation from damage."""
    cdef void *addr
    cdef Py_ssize_t size
    cdef readonly object path
    # Where the bytes found lost begin (a guard caught a read past the end of the file cut
    # short), else size: the pages that faulted read as zeros from then on, without a fault.
    cdef Py_ssize_t cut

    def lost(self, Py_ssize_t offset=-1, bint stat=False):
        """Where the bytes the core found lost begin (``cut``), after marking offset there
        (a fault's) and, with stat, the size of the file now (the page its new end falls in
        reads as zeros past it without a fault)."""
        if stat and self.path is not None:
            try:
                self._cut_at(os.stat(self.path).st_size)
            except OSError:
                pass
        self._cut_at(offset)
        return self.cut

    cdef void _cut_at(self, Py_ssize_t offset):
        if 0 <= offset < self.cut:
            self.cut = offset

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer *view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("a mapped file is read-only")
        PyBuffer_FillInfo(view, self, self.addr, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __reduce__(self):
        return bytes, (bytes(self),)

    def __dealloc__(self):
        cdef _Unmapping *later
        if self.addr == NULL:
            return
        # The kernel unmaps each page on its own (about 1 ms per 32 MiB), and the last batch
        # over a file goes in the consumer's loop: a large mapping goes on a thread of its own.
        if self.size >= UNMAP_LATER_BYTES:
            later = <_Unmapping *>malloc(sizeof(_Unmapping))
            if later != NULL:
                later.addr, later.size = self.addr, self.size
                if PyThread_start_new_thread(_unmap_later, later) != PYTHREAD_INVALID_THREAD_ID:
                    return
                free(later)
        with nogil:
            tfl_unmap(self.addr, self.size)


def map_file(int fd, Py_ssize_t size, path=None):
    """The first size bytes (> 0) of the regular file open as fd, mapped read-only: reading
    them reads the page cache, with no copy. The descriptor may be closed at once. OSError
    where the system cannot map it. The core's scans and decodes of the mapping raise errors
    instead of ending the process when the file is truncated under it (csrc/guard.h); path
    (the file's name) lets them tell that from damage."""
    if size <= 0:
        raise InvalidArgumentError("map_file needs a size > 0 (an empty file cannot be mapped)")
    cdef _MappedFile out = _MappedFile.__new__(_MappedFile)
    cdef int err
    if tfl_guard_install() != 0:  # before any read of the mapping; again, in case another took SIGBUS
        err = errno
        raise OSError(err, os.strerror(err))
    out.addr = tfl_map_read(fd, size)
    if out.addr == NULL:
        err = errno  # before any other call can change it
        raise OSError(err, os.strerror(err))
    out.size = out.cut = size
    out.path = path
    return out


cdef extern from *:
    """
    /* A word two processes share (a batch segment's "held" flag). The release store makes
     * every read of the batch before it visible first, which x86 does anyway and aarch64
     * does not; the acquire load orders the reads and writes after it. */
    #if defined(_MSC_VER)
    #include <intrin.h>
    static void tfl_store_release_i32(int32_t *p, int32_t v) { _InterlockedExchange((volatile long *)p, v); }
    static int32_t tfl_load_acquire_i32(int32_t *p) { return _InterlockedOr((volatile long *)p, 0); }
    #else
    static void tfl_store_release_i32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static int32_t tfl_load_acquire_i32(int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    #endif
    """
    void tfl_store_release_i32(int32_t *p, int32_t v) nogil
    int32_t tfl_load_acquire_i32(int32_t *p) nogil


cdef int32_t *_shared_word(buf, Py_ssize_t index, Py_buffer *view) except NULL:
    PyObject_GetBuffer(buf, view, PyBUF_WRITABLE)
    if index < 0 or (index + 1) * 4 > view.len or (<size_t>view.buf) % 4:
        PyBuffer_Release(view)
        raise InvalidArgumentError(f"word {index} is not an aligned int32 of the {view.len}-byte buffer")
    return <int32_t *>view.buf + index


def store_release(buf, Py_ssize_t index, int32_t value):
    """Set int32 word index of a writable buffer with release ordering (reads and writes of
    this process before it are seen first by another process that loads it acquiring)."""
    cdef Py_buffer view
    tfl_store_release_i32(_shared_word(buf, index, &view), value)
    PyBuffer_Release(&view)


def load_acquire(buf, Py_ssize_t index):
    """int32 word index of a writable buffer, loaded with acquire ordering."""
    cdef Py_buffer view
    cdef int32_t value = tfl_load_acquire_i32(_shared_word(buf, index, &view))
    PyBuffer_Release(&view)
    return value
