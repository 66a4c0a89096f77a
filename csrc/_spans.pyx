# cython: freethreading_compatible = False
"""Records and values as spans of blocks: the index arrays a gathered batch is made of
(a piece's read blocks joined, the interleave's rounds), bytes values copied back to back
into one block, and the bytes objects of spans (a batch's records, a block of values).

The pure-Python twin is tfrecord_lite/_spans_py.py; both expose the same names.
"""
cimport numpy as cnp
import numpy as np

from tfrecord_lite import _framing
from tfrecord_lite.errors import ArgumentTypeError, InvalidArgumentError
from tfrecord_lite.errors import TruncatedRecordError as _TruncatedRecordError  # not a name of the module

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_New
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy

from cursor cimport acquire
from frame cimport FRAME_OVERHEAD
from objects cimport (NOGIL_MIN_BYTES, ByteSpan, bytes_array, pool_bytes, pool_clear, pool_count, short_clear,
                     short_count)
from guard cimport TFL_GUARD_CAPSULE, mapped_kept, tfl_guard_fns

cnp.import_array()

# Records copied out of their blocks may lie in mapped files: inside _framing's guard.
cdef tfl_guard_fns *guard = <tfl_guard_fns *>PyCapsule_GetPointer(_framing._guard_capsule, TFL_GUARD_CAPSULE)


cdef extern from "Python.h":
    void _list_set "PyList_SET_ITEM" (object, Py_ssize_t, PyObject *)  # steals the reference


# -- index arrays over blocks ---------------------------------------------------------------

cdef inline int64_t _entry(const char *p) noexcept nogil:
    """The int64 at p: a view's entries need not be aligned."""
    cdef int64_t v
    memcpy(&v, p, 8)
    return v


cdef inline void _copy(int64_t *o, const char *p, Py_ssize_t step, Py_ssize_t n, int64_t shift) noexcept nogil:
    """o[k] = the k-th of n int64 entries step bytes apart from p, plus shift."""
    cdef Py_ssize_t k
    if step == 8:
        for k in range(n):
            o[k] = (<const int64_t *>p)[k] + shift
    else:
        for k in range(n):
            o[k] = _entry(p + k * step) + shift


cdef void _interleave(int64_t *o, const char **src, const Py_ssize_t *step, const int64_t *shift,
                      Py_ssize_t m, Py_ssize_t block, Py_ssize_t rounds, Py_ssize_t extra) noexcept nogil:
    """The output in order: rounds of a block from each part (src[j], step[j] bytes apart,
    plus shift[j]), then a block from each of the first extra parts. Written in order, each
    cache line of o whole at once: scattered part by part (a write every m entries, m passes
    over o), 16 files at block_length 1 took the 16-core machine's consumer 56 µs a W2 batch,
    its cache lines evicted between the passes by the 15 threads parsing beside it."""
    cdef Py_ssize_t r, j
    cdef bint packed = True  # every part's entries contiguous
    for j in range(m):
        packed = packed and step[j] == 8
    if block == 1 and packed:  # TensorFlow's default: an entry of each part in turn
        for r in range(rounds):
            for j in range(m):
                o[j] = (<const int64_t *>src[j])[r] + shift[j]
            o += m
        for j in range(extra):
            o[j] = (<const int64_t *>src[j])[rounds] + shift[j]
        return
    for r in range(rounds + 1):
        for j in range(m if r < rounds else extra):
            _copy(o, src[j] + r * block * step[j], step[j], block, shift[j])
            o += block


cdef struct Parts:
    # Per column c and part j, at [c * m + j]: where its entries are and how many bytes apart
    # (any stride a view may have), how many, and what to add to them.
    const char **src
    Py_ssize_t *step
    Py_ssize_t *count
    int64_t *shift
    Py_ssize_t m, k


cdef int _parts(Parts *p, str name, tuple columns, object add) except -1:
    """Parts of k columns (lists of one int64 array, or view of one, per part) into p, which
    the caller frees with PyMem_Free(p.src) even on error. The pointers stay valid while
    the caller holds columns."""
    cdef Py_ssize_t m, k = len(columns), c, j, slots
    cdef const int64_t[:] v
    cdef const int64_t[:] plus
    cdef object part
    m = len(columns[0]) if k else 0
    p.m, p.k = m, k
    slots = m * k if m * k else 1
    p.src = <const char **>PyMem_Realloc(NULL, slots * (sizeof(char *) + 2 * sizeof(Py_ssize_t) + sizeof(int64_t)))
    if p.src == NULL:
        raise MemoryError()
    p.step = <Py_ssize_t *>(p.src + slots)
    p.count = p.step + slots
    p.shift = <int64_t *>(p.count + slots)
    for c in range(k):
        if len(columns[c]) != m:
            raise InvalidArgumentError(f"{name}: column {c} has {len(columns[c])} parts, column 0 {m}")
        for j in range(m):
            part = columns[c][j]
            p.shift[c * m + j] = 0
            if (cnp.PyArray_Check(part) and cnp.PyArray_TYPE(part) == cnp.NPY_INT64 and cnp.PyArray_NDIM(part) == 1
                    and cnp.PyArray_ISNOTSWAPPED(part)):
                # An int64 array or view of one, as the index arrays are: no memoryview to make
                # (a few hundred ns each, for each part of each column).
                p.src[c * m + j] = <const char *>cnp.PyArray_DATA(part)
                p.step[c * m + j] = cnp.PyArray_STRIDES(part)[0]
                p.count[c * m + j] = cnp.PyArray_DIMS(part)[0]
                continue
            v = part
            p.src[c * m + j] = <const char *>&v[0] if v.shape[0] else NULL
            p.step[c * m + j] = v.strides[0]
            p.count[c * m + j] = v.shape[0]
    if add is not None:
        plus = add
        if plus.shape[0] != m:
            raise InvalidArgumentError(f"{name}: {plus.shape[0]} offsets for {m} parts")
        for j in range(m):
            p.shift[j] = plus[j]
    return 0


cdef Py_ssize_t _uneven(const Parts *p) noexcept:
    """The slot (c * m + j) of the first part whose entries differ in number from part j of
    column 0, or -1: the columns of a join describe the same records."""
    cdef Py_ssize_t at
    for at in range(p.m, p.k * p.m):
        if p.count[at] != p.count[at % p.m]:
            return at
    return -1


cdef int64_t **_outputs(Py_ssize_t k, Py_ssize_t n, list out) except NULL:
    """k new int64 arrays of n entries appended to out; their data pointers (PyMem_Free)."""
    cdef int64_t **o = <int64_t **>PyMem_Realloc(NULL, (k if k else 1) * sizeof(int64_t *))
    cdef Py_ssize_t c
    if o == NULL:
        raise MemoryError()
    for c in range(k):
        out.append(np.empty(n, np.int64))
        o[c] = <int64_t *>cnp.PyArray_DATA(out[c])
    return o


def interleave(columns, Py_ssize_t block, Py_ssize_t rounds, Py_ssize_t extra, add=None):
    """A gathered batch's index arrays, each column (a list of one int64 array per part)
    interleaved a block at a time: ``rounds`` rounds of ``block`` entries of each part in
    turn, then one more block of each of the first ``extra`` parts; ``add[j]`` (int64, one
    per part) is added to part j's entries of the first column (the block numbers). A part
    holds at least the entries it gives. A tuple of one array per column, all made in one
    call. Under the GIL when small: a batch's index arrays are a few thousand entries, less
    work than a GIL handoff (in NumPy, several passes that each released and retook it cost
    the interleave's thread twice as much); whole rounds of 16 files are 16 pieces' worth."""
    cdef tuple held = tuple(columns)  # referenced while the GIL is released
    cdef Parts p
    cdef Py_ssize_t span, n, j, c, need
    cdef int64_t **o = NULL
    cdef list out = []
    p.src = NULL
    try:
        _parts(&p, "interleave", held, add)
        if block < 1 or rounds < 0 or not 0 <= extra <= p.m:
            raise InvalidArgumentError(f"interleave: block {block}, rounds {rounds} and extra {extra} "
                                       f"do not describe an interleave of {p.m} parts")
        span = rounds * block
        for c in range(p.k):
            for j in range(p.m):
                need = span + (block if j < extra else 0)
                if p.count[c * p.m + j] < need:
                    raise InvalidArgumentError(f"interleave: part {j} has {p.count[c * p.m + j]} entries, not {need}")
        n = p.m * span + extra * block
        o = _outputs(p.k, n, out)
        if n * p.k * 8 >= NOGIL_MIN_BYTES:
            with nogil:
                _interleave_columns(o, &p, block, rounds, extra)
        else:
            _interleave_columns(o, &p, block, rounds, extra)
        return tuple(out)
    finally:
        PyMem_Free(o)
        PyMem_Free(p.src)


cdef void _interleave_columns(int64_t **o, const Parts *p, Py_ssize_t block, Py_ssize_t rounds,
                              Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(p.k):
        _interleave(o[c], p.src + c * p.m, p.step + c * p.m, p.shift + c * p.m, p.m, block, rounds, extra)


cdef void _concat(int64_t **o, const Parts *p) noexcept nogil:
    cdef Py_ssize_t c, j, at
    cdef int64_t *w
    for c in range(p.k):
        w = o[c]
        for j in range(p.m):
            at = c * p.m + j
            _copy(w, p.src[at], p.step[at], p.count[at], p.shift[at])
            w += p.count[at]


def concat(columns, add=None):
    """A gathered batch's index arrays, each column (a list of one int64 array, or view of
    one, per part) with its parts one after the other; ``add[j]`` (int64, one per part) is
    added to part j's entries of the first column (the block numbers). A tuple of one
    array per column, all made in one call, under the GIL when small, as ``interleave``.
    In NumPy (a concatenate per column, an add for the block numbers) a join of two slices
    of a batch took the consumer's thread 14.5 µs on 2 cores, here 6.8."""
    cdef tuple held = tuple(columns)  # referenced while the GIL is released
    cdef Parts p
    cdef Py_ssize_t n = 0, j, c, at
    cdef int64_t **o = NULL
    cdef list out = []
    p.src = NULL
    try:
        _parts(&p, "concat", held, add)
        at = _uneven(&p)
        if at >= 0:
            c, j = divmod(at, p.m)
            raise InvalidArgumentError(f"concat: part {j} has {p.count[j]} entries in column 0, "
                                       f"{p.count[at]} in column {c}")
        for j in range(p.m):
            n += p.count[j]
        o = _outputs(p.k, n, out)
        if n * p.k * 8 >= NOGIL_MIN_BYTES:
            with nogil:
                _concat(o, &p)
        else:
            _concat(o, &p)
        return tuple(out)
    finally:
        PyMem_Free(o)
        PyMem_Free(p.src)


cdef Py_ssize_t _run_starts(const int64_t[:] which, Py_ssize_t most, int64_t *o) noexcept nogil:
    """The positions after the first where an entry differs from the one before: counted,
    no further than most + 1 (most < 0: all of them), or written to o when o is not NULL."""
    cdef Py_ssize_t i, got = 0
    for i in range(1, which.shape[0]):
        if which[i] != which[i - 1]:
            if o != NULL:
                o[got] = i
            got += 1
            if got == most + 1:
                break
    return got


def run_starts(const int64_t[:] which, most=None):
    """Where runs of equal entries begin in which, after the first (int64 positions), or
    None when there are more than ``most`` of them. A batch's block numbers say whether its
    records come in runs long enough to keep as segments (``_gather.Gathered.to_batch``):
    for an interleave one record at a time the first few entries answer, where NumPy
    compared every pair and listed every change, releasing the GIL for each step."""
    cdef Py_ssize_t bound = -1 if most is None else most, got
    cdef int64_t *o
    if most is not None and most < 0:
        raise InvalidArgumentError(f"run_starts: most must be 0 or more, not {most}")
    if which.shape[0] * 8 < NOGIL_MIN_BYTES:
        got = _run_starts(which, bound, NULL)
    else:
        with nogil:
            got = _run_starts(which, bound, NULL)
    if most is not None and got > bound:
        return None
    out = np.empty(got, np.int64)
    o = <int64_t *>cnp.PyArray_DATA(out)
    if which.shape[0] * 8 < NOGIL_MIN_BYTES:
        _run_starts(which, -1, o)
    else:
        with nogil:
            _run_starts(which, -1, o)
    return out


def run_steps(const int64_t[:] index, const int64_t[:] bounds):
    """Per run [bounds[k], bounds[k + 1]) of index: the step by which its entries go up when
    that is one positive step throughout (a run of one record: 1), else 0. A batch's runs of
    one block whose records are every step-th of their file are then a BlockOrigin each
    (``_gather.Gathered.runs``), not three arrays of a record's origin apiece."""
    cdef Py_ssize_t k, i, a, z, m = bounds.shape[0] - 1
    cdef int64_t step
    if m < 0:
        raise InvalidArgumentError("run_steps: bounds needs at least one entry")
    out = np.zeros(m, np.int64)
    cdef int64_t[:] o = out
    for k in range(m):
        a, z = bounds[k], bounds[k + 1]
        if not 0 <= a < z <= index.shape[0]:
            raise InvalidArgumentError(f"run_steps: run {k} is [{a}, {z}) of {index.shape[0]} entries")
        step = index[a + 1] - index[a] if z - a > 1 else 1
        if step <= 0:
            continue
        for i in range(a + 2, z):
            if index[i] - index[i - 1] != step:
                break
        else:
            o[k] = step
    return out


cdef void _join_runs(int64_t **o, const Parts *p, const int64_t *firsts, const int64_t *steps) noexcept nogil:
    cdef Py_ssize_t j, k, count
    cdef int64_t *w = o[0]
    cdef int64_t *o_s = o[1]
    cdef int64_t *o_l = o[2]
    cdef int64_t *o_i = o[3]
    for j in range(p.m):
        count = p.count[j]
        for k in range(count):
            w[k] = j
            o_i[k] = firsts[j] + k * steps[j]
        _copy(o_s, p.src[j], p.step[j], count, 0)
        _copy(o_l, p.src[p.m + j], p.step[p.m + j], count, 0)
        w += count
        o_s += count
        o_l += count
        o_i += count


def join_runs(list starts, list lengths, list firsts, list steps):
    """Runs of records one after the other, as a gathered batch's index arrays
    ``(which, starts, lengths, index)``: per record its run j, its data start and length
    (run j's ``starts[j]`` and ``lengths[j]``, int64 views of any stride), and
    ``firsts[j] + k * steps[j]`` for the k-th record of run j (its number in its file).
    Under the GIL when small, for the reason ``interleave`` gives; a piece of 16,384 records
    (16 threads) is written without it: its 512 KiB of index arrays, written through typed
    memoryviews under the GIL, took 174 µs (8% of all the GIL time of W2 parse on 16 cores),
    now 30 µs, 5 of them holding the GIL."""
    cdef Py_ssize_t m = len(starts), n = 0, j
    cdef tuple held = (tuple(starts), tuple(lengths))  # referenced while the GIL is released
    cdef Parts p
    cdef int64_t *numbers = NULL  # per run: its first record's number, then the step
    cdef int64_t **o = NULL
    cdef list out = []
    if not len(lengths) == len(firsts) == len(steps) == m:
        raise InvalidArgumentError(f"join_runs: {m} starts, {len(lengths)} lengths, {len(firsts)} firsts "
                                   f"and {len(steps)} steps")
    p.src = NULL
    try:
        _parts(&p, "join_runs", held, None)
        j = _uneven(&p) - m
        if j >= 0:
            raise InvalidArgumentError(f"join_runs: run {j} has {p.count[j]} starts and {p.count[m + j]} lengths")
        numbers = <int64_t *>PyMem_Realloc(NULL, 2 * (m if m else 1) * sizeof(int64_t))
        if numbers == NULL:
            raise MemoryError()
        for j in range(m):
            numbers[j], numbers[m + j] = firsts[j], steps[j]
            n += p.count[j]
        o = _outputs(4, n, out)
        if n * 32 >= NOGIL_MIN_BYTES:
            with nogil:
                _join_runs(o, &p, numbers, numbers + m)
        else:
            _join_runs(o, &p, numbers, numbers + m)
        return tuple(out)
    finally:
        PyMem_Free(o)
        PyMem_Free(numbers)
        PyMem_Free(p.src)


def frames_tile(starts, lengths):
    """Whether the records' frames lie back to back in their block, each header right after
    the footer before (starts: each record's data start, lengths: its data length; integer
    arrays, int64 views of any stride taken as they are). A writer then copies the whole run
    verbatim. NumPy took 4 µs of the GIL a 2,048-record block to say so, this 1.2."""
    cdef const int64_t[:] s = np.asarray(starts, np.int64)
    cdef const int64_t[:] l = np.asarray(lengths, np.int64)
    cdef Py_ssize_t i, n = s.shape[0]
    if l.shape[0] != n:
        raise InvalidArgumentError(f"frames_tile: {n} starts and {l.shape[0]} lengths")
    for i in range(n - 1):
        if s[i + 1] != s[i] + l[i] + FRAME_OVERHEAD:
            return False
    return True


# -- bytes values back to back: moving many values as one block --------------------------------

def value_lengths(list values):
    """The byte length of each value (int64), or None unless every value is exactly ``bytes``:
    the check and the offsets that ``copy_values`` needs, in one pass. Borrowed references
    and a raw pointer: 1.2 µs per 2,048 values, against 2 µs through a typed memoryview (a
    DataLoader worker checks every bytes list of every batch it packs)."""
    cdef Py_ssize_t i, n = len(values)
    cdef cnp.ndarray out = np.empty(n, np.int64)
    cdef int64_t *lengths = <int64_t *>cnp.PyArray_DATA(out)
    cdef PyObject *v
    for i in range(n):
        v = PyList_GET_ITEM(values, i)
        if not PyBytes_CheckExact(<object>v):
            return None
        lengths[i] = PyBytes_GET_SIZE(<object>v)
    return out


cdef void copy_all(char *dst, const char **src, const Py_ssize_t *sizes, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        memcpy(dst, src[i], sizes[i])
        dst += sizes[i]


def bytes_list(values):
    """A new list of the values when every one is exactly ``bytes``, else None. values: a
    list, a 1-D object array, or any iterable. The encoders read a bytes column's values
    without the GIL, so they hold references of their own; made and checked in one pass,
    from the array's own pointers: 2.4 µs of the GIL, which parallel encoders share, per
    2,048 values, where tolist() and a check took 5.7."""
    cdef Py_ssize_t i, n, stride = sizeof(PyObject *)
    cdef char *data = NULL
    cdef PyObject *v
    cdef bint copied = False
    cdef list out
    if type(values) is np.ndarray and values.ndim == 1 and values.dtype.kind == "O":  # a subclass (masked) is iterated
        data, stride, n = <char *>cnp.PyArray_DATA(values), cnp.PyArray_STRIDE(values, 0), values.shape[0]
    else:
        if type(values) is not list:
            values, copied = list(values), True  # a copy already: checked, not copied again
        n = len(values)
    # Every item NULL until set: a list dropped halfway is freed cleanly.
    out = values if copied else PyList_New(n)
    for i in range(n):
        v = (<PyObject **>(data + i * stride))[0] if data != NULL else PyList_GET_ITEM(values, i)
        if v == NULL or not PyBytes_CheckExact(<object>v):
            return None
        if not copied:
            Py_INCREF(<object>v)
            _list_set(out, i, v)
    return out


def copy_values(list values, out, Py_ssize_t at=0):
    """Copy bytes values back to back into the writable buffer ``out`` from byte ``at``;
    returns the byte after the last. Large copies run without the GIL."""
    cdef tuple held = tuple(values)  # keeps every value alive while the GIL is released
    cdef Py_ssize_t i, n = len(held), total = 0, slots = n if n else 1
    cdef const char **src
    cdef Py_ssize_t *sizes
    cdef Py_buffer view
    cdef char *dst
    cdef object v
    src = <const char **>PyMem_Realloc(NULL, slots * (sizeof(char *) + sizeof(Py_ssize_t)))
    if src == NULL:
        raise MemoryError()
    sizes = <Py_ssize_t *>(src + slots)
    try:
        for i in range(n):
            v = held[i]
            if not PyBytes_CheckExact(v):
                raise ArgumentTypeError(f"copy_values: value {i} is {type(v).__name__}, not bytes")
            src[i] = PyBytes_AS_STRING(v)
            sizes[i] = PyBytes_GET_SIZE(v)
            total += sizes[i]
        PyObject_GetBuffer(out, &view, PyBUF_WRITABLE)
        try:
            if at < 0 or total > view.len - at:
                raise InvalidArgumentError(f"copy_values: {total} bytes do not fit at {at} of a {view.len}-byte buffer")
            dst = <char *>view.buf + at
            if total >= NOGIL_MIN_BYTES:
                with nogil:
                    copy_all(dst, src, sizes, n)
            else:
                copy_all(dst, src, sizes, n)
        finally:
            PyBuffer_Release(&view)
        return at + total
    finally:
        PyMem_Free(src)


def split_records(list buffers, const int64_t[:] which, const int64_t[:] starts, const int64_t[:] lengths):
    """Record j is ``bytes(buffers[which[j]][starts[j]:starts[j] + lengths[j]])``: a 1-D
    object array of them (a RecordBatch's records, however many blocks they lie in).
    TruncatedRecordError (index: j) for the first record j of a mapped file cut short under
    its mapping (csrc/guard.h)."""
    cdef Py_ssize_t nb = len(buffers), n = which.shape[0], j, b, got = 0
    cdef Py_buffer *views
    cdef ByteSpan *spans = NULL
    cdef uintptr_t fault
    if starts.shape[0] != n or lengths.shape[0] != n:
        raise InvalidArgumentError("split_records: which, starts and lengths must have the same length")
    views = <Py_buffer *>PyMem_Realloc(NULL, (nb if nb else 1) * sizeof(Py_buffer))
    if views == NULL:
        raise MemoryError()
    try:
        for b in range(nb):
            acquire(buffers[b], &views[b])
            got += 1
        for j in range(n):
            b = which[j]
            if b < 0 or b >= nb or starts[j] < 0 or lengths[j] < 0 or starts[j] > views[b].len - lengths[j]:
                raise InvalidArgumentError(f"split_records: record {j} ({b}, {starts[j]}, {lengths[j]}) lies "
                                           "outside its buffer")
        spans = <ByteSpan *>PyMem_Realloc(NULL, (n if n else 1) * sizeof(ByteSpan))
        if spans == NULL:
            raise MemoryError()
        for j in range(n):
            spans[j].ptr = <const unsigned char *>views[which[j]].buf + starts[j]
            spans[j].len = lengths[j]
        j = _lost(buffers, which, starts, lengths, 0, views)  # bytes a guard found lost before
        if j < 0:
            guard.enter()
            try:
                out = bytes_array(spans, n)
            finally:
                fault = guard.leave()
            if not fault:
                return out
            j = _lost(buffers, which, starts, lengths, fault, views)
        raise _TruncatedRecordError(
            "the record's bytes were lost: its file was cut short (or could not be read) while mapped",
            index=max(j, 0), hint="A file read with memory_map=True must not change until it is read")
    finally:
        PyMem_Free(spans)
        for b in range(got):
            PyBuffer_Release(&views[b])
        PyMem_Free(views)


cdef Py_ssize_t _lost(list buffers, const int64_t[:] which, const int64_t[:] starts, const int64_t[:] lengths,
                      uintptr_t fault, Py_buffer *views) except -2:
    """The first record past where its mapped file lost its bytes (``_MappedFile.lost``, after
    the fault at address fault and, then, the file's size now are marked there), or -1."""
    cdef Py_ssize_t b, j
    cdef list kept = mapped_kept(buffers, views, len(buffers), fault, fault != 0, _framing._MappedFile)
    for b in range(len(buffers)):
        if kept[b] is not None and kept[b] < views[b].len:
            break
    else:
        return -1  # nothing lost: no record to look at
    for j in range(which.shape[0]):
        if kept[which[j]] is not None and starts[j] + lengths[j] > kept[which[j]]:
            return j
    return -1


def split_values(buf, const int64_t[:] offsets):
    """Value i is ``bytes(buf[offsets[i]:offsets[i + 1]])``: a 1-D object array of them (what
    copy_values placed, given its offsets), made without numpy looking at each value."""
    cdef Py_buffer view
    cdef Py_ssize_t i, n = offsets.shape[0] - 1
    cdef ByteSpan *spans = NULL
    if n < 0:
        raise InvalidArgumentError("split_values: offsets must hold at least one position")
    acquire(buf, &view)
    try:
        if offsets[0] < 0 or offsets[n] > view.len:
            raise InvalidArgumentError(f"split_values: offsets run from {offsets[0]} to {offsets[n]}, "
                                       f"outside a {view.len}-byte buffer")
        for i in range(n):
            if offsets[i] > offsets[i + 1]:
                raise InvalidArgumentError(f"split_values: offset {i + 1} is before offset {i}")
        spans = <ByteSpan *>PyMem_Realloc(NULL, (n if n else 1) * sizeof(ByteSpan))
        if spans == NULL:
            raise MemoryError()
        for i in range(n):
            spans[i].ptr = <const unsigned char *>view.buf + offsets[i]
            spans[i].len = offsets[i + 1] - offsets[i]
        return bytes_array(spans, n)
    finally:
        PyMem_Free(spans)
        PyBuffer_Release(&view)


include "objects_kept.pxi"
