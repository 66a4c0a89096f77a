# Included by _example.pyx: the records a decode reads (_Records), pointed at where they
# lie (a list's bytes-likes, a RecordBatch's blocks, an interleave's gathered records),
# with the buffers behind them held until the decode ends.


cdef struct Run:
    const char *starts        # int64 per record (strided views: step bytes apart)
    const char *lengths
    const char *which         # int64 per record: its block; NULL: every record in `block`
    Py_ssize_t starts_step, lengths_step, which_step
    Py_ssize_t first, count, block   # records first:first + count of the batch


cdef inline int64_t run_value(const char *values, Py_ssize_t step, Py_ssize_t j) noexcept nogil:
    """Record j's value in one of a Run's strided int64 arrays."""
    return (<const int64_t *>(values + j * step))[0]


cdef inline int64_t run_block(Run *r, Py_ssize_t j) noexcept nogil:
    return r.block if r.which == NULL else run_value(r.which, r.which_step, j)


cdef class _Records:
    """Pointers to a batch's records, with the buffers behind them held until release:
    one buffer per record (a list of bytes-likes), one per block (a RecordBatch's segments
    of (frames, starts, lengths)), or records in place in several blocks in any order (an
    interleave's gathered batch: ``buffers``, and per record ``which`` buffer, ``starts``,
    ``lengths``), read where they lie instead of being copied together first. The records
    of blocks are pointed at by ``point()``, without the GIL (the decoder calls it in its
    GIL-free parse): the GIL is held for work per block, not per record. A list's bytes
    objects are pointed at without a buffer each: a tuple of the records holds them."""
    cdef const unsigned char **ptrs
    cdef Py_ssize_t *lens
    cdef Py_buffer *views     # views[:got] are live
    cdef Run *runs            # runs[:nruns]: the records of blocks, pointed at by point()
    cdef Py_ssize_t n, got, nruns, total_bytes
    cdef Py_ssize_t bad, bad_run   # point(): the first record out of its block (else -1), its run
    cdef list arrays          # views of the runs' index arrays, kept acquired
    cdef object owners        # the object behind each of views[:got]
    cdef tuple held           # a list's records, each held while read (bytes have no view)
    cdef bint blocks          # whether they are blocks (a RecordBatch's or gathered records')

    def __cinit__(self, records):
        cdef Py_ssize_t k = 0, length
        cdef const unsigned char *ptr
        cdef Py_buffer *v
        inner = None if type(records) is list else getattr(records, "_gathered", None)
        if inner is not None:  # a RecordBatch holding a Gathered
            records = inner
        segments = None if type(records) is list else getattr(records, "segments", None)
        gathered = segments is None and type(records) is not list and hasattr(records, "which")
        if segments is None and not gathered:  # not the caller's list, which may change meanwhile
            records = self.held = tuple(records)
        items = records.buffers if gathered else records if segments is None else segments
        self.n = (len(records.which) if gathered else len(records) if segments is None
                  else sum(len(seg[1]) for seg in segments))
        self.bad = -1
        self.arrays = []
        self.owners = ([] if self.held is not None else items if segments is None
                       else [segment[0] for segment in segments])
        self.blocks = gathered or segments is not None
        self.ptrs = <const unsigned char **>malloc((self.n if self.n else 1) * sizeof(char *))
        self.lens = <Py_ssize_t *>malloc((self.n if self.n else 1) * sizeof(Py_ssize_t))
        self.views = <Py_buffer *>malloc((len(items) if len(items) else 1) * sizeof(Py_buffer))
        self.runs = <Run *>malloc((1 if gathered or segments is None or not segments else len(segments))
                                  * sizeof(Run))
        if self.ptrs == NULL or self.lens == NULL or self.views == NULL or self.runs == NULL:
            raise MemoryError()
        for item in items:
            if self.held is not None and PyBytes_CheckExact(item):
                ptr, length = <const unsigned char *>PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item)
            else:
                v = &self.views[self.got]
                acquire(item if segments is None else item[0], v)
                self.got += 1
                if gathered:
                    continue
                if segments is not None:
                    if len(item[2]) != len(item[1]) or k + len(item[1]) > self.n:
                        raise InvalidArgumentError("a RecordBatch segment has mismatched starts and lengths")
                    k += self._run(k, item[1], item[2], None, self.got - 1)
                    continue
                self.owners.append(item)
                ptr, length = <const unsigned char *>v.buf, v.len
            self.ptrs[k] = ptr
            self.lens[k] = length
            self.total_bytes += length
            k += 1
        if gathered:
            if len(records.starts) != self.n or len(records.lengths) != self.n:
                raise InvalidArgumentError("gathered records have mismatched which, starts and lengths")
            self._run(0, records.starts, records.lengths, records.which, -1)

    cdef Py_ssize_t _run(self, Py_ssize_t first, starts, lengths, which, Py_ssize_t block) except -1:
        """Records first:first + len(starts) lie at starts, lengths in block (or in which's)."""
        cdef const int64_t[:] s = starts, l = lengths   # strided: slices with a step
        cdef const int64_t[:] w
        cdef Run *r = &self.runs[self.nruns]
        cdef Py_ssize_t m = s.shape[0]
        if m == 0:
            return 0
        r.first, r.count, r.block = first, m, block
        r.starts, r.starts_step = <const char *>&s[0], s.strides[0]
        r.lengths, r.lengths_step = <const char *>&l[0], l.strides[0]
        r.which, r.which_step = NULL, 0
        if which is not None:
            w = which
            if w.shape[0] != m:
                raise InvalidArgumentError("gathered records have mismatched which, starts and lengths")
            r.which, r.which_step = <const char *>&w[0], w.strides[0]
            self.arrays.append(w)
        self.arrays.append(s)   # the views themselves: their buffers stay acquired
        self.arrays.append(l)
        self.nruns += 1
        return m

    cdef int point(self) noexcept nogil:
        """Point at the records of the runs; -1 when one lies outside its block (self.bad)."""
        cdef Py_ssize_t i, j, k, b
        cdef int64_t start, length
        cdef Run *r
        cdef Py_buffer *v
        for i in range(self.nruns):
            r = &self.runs[i]
            for j in range(r.count):
                k = r.first + j
                b = run_block(r, j)
                start = run_value(r.starts, r.starts_step, j)
                length = run_value(r.lengths, r.lengths_step, j)
                if not 0 <= b < self.got or start < 0 or length < 0 or start > self.views[b].len - length:
                    self.bad, self.bad_run = k, i
                    return -1
                v = &self.views[b]
                self.ptrs[k] = <const unsigned char *>v.buf + start
                self.lens[k] = length
                self.total_bytes += length
        return 0

    cdef bint any_cut(self) except -1:
        """Whether a block is a mapped file a guard found bytes of lost (``_MappedFile.lost``):
        the pages past that read as zeros since, without a fault. Blocks only: a list of
        records is the caller's (memory_map gives blocks)."""
        if not self.blocks:
            return False
        for owner in self.owners:
            if type(owner) is _framing._MappedFile and owner.lost() < len(owner):
                return True
        return False

    cdef Py_ssize_t first_lost(self, uintptr_t fault, bint stat) except -2:
        """The first record (in batch order) past where a mapped file (memory_map) lost its
        bytes (``_MappedFile.lost``: the fault at address fault, with stat its size now), else the
        one whose bytes hold address fault (a read that failed otherwise), else -1. Its bytes
        past that were read as zeros: with a fault where a whole page lies past the file's
        end, without one in the page the end falls in and after a fault."""
        cdef Py_ssize_t i, tries, b = 0
        cdef uintptr_t at, buf
        cdef list kept = mapped_kept(self.owners, self.views, self.got, fault, stat, _framing._MappedFile)
        for i in range(self.n if any(k is not None for k in kept) else 0):
            at = <uintptr_t>self.ptrs[i]
            for tries in range(self.got):  # records mostly follow their blocks' order
                buf = <uintptr_t>self.views[b].buf
                if buf <= at and at + <uintptr_t>self.lens[i] <= buf + <uintptr_t>self.views[b].len:
                    break
                b = (b + 1) % self.got
            else:
                continue
            if kept[b] is not None and <Py_ssize_t>(at - buf) + self.lens[i] > kept[b]:
                return i
        if fault:
            for i in range(self.n):
                if <uintptr_t>self.ptrs[i] <= fault < <uintptr_t>self.ptrs[i] + <uintptr_t>self.lens[i]:
                    return i
        return -1

    cdef object lost_record(self, Py_ssize_t i):
        """The error for record i, whose bytes were lost: its mapped file was truncated."""
        return _TruncatedRecordError(
            "the record's bytes were lost while it was parsed: its file was cut short (or could not be read) "
            "while mapped", index=i, hint="A file read with memory_map=True must not change until it is read")

    cdef object bad_record(self):
        """The error for the record point() stopped at."""
        cdef Run *r = &self.runs[self.bad_run]
        cdef Py_ssize_t j = self.bad - r.first
        cdef int64_t b = run_block(r, j)
        if not 0 <= b < self.got:
            return InvalidArgumentError(f"a gathered record names block {b} of {self.got}")
        return InvalidArgumentError(f"a RecordBatch record ({run_value(r.starts, r.starts_step, j)}, "
                                    f"{run_value(r.lengths, r.lengths_step, j)}) lies outside its "
                                    f"{self.views[b].len}-byte block")

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.got):
            PyBuffer_Release(&self.views[i])
        free(self.views)
        free(self.ptrs)
        free(self.lens)
        free(self.runs)
