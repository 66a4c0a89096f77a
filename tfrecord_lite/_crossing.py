"""How a batch crosses from a DataLoader worker to the main process (``tfrecord_lite.torch``).

In a worker each dict (parsed batch), list, or object array (a batch of raw records) is yielded
as a dict or list subclass, or a holder, that pickles as ONE buffer plus a small layout: every
array, tensor, object array of ``bytes``, list of ``bytes`` and BytesColumn in it is copied into
that buffer (bytes as values + int64 offsets, copied and split again by the core), and the main
process gets the very same structure, types and dtypes, its arrays and tensors as views of the
buffer. torch moves each tensor's storage through its own descriptor handshake and pickles
``bytes`` one object at a time, which cost more than the batch took to parse; one buffer per
batch makes that one copy.

Where the buffer lives: small batches go through the pipe. From ``_POOL_MIN`` bytes a batch
is written into one of the worker's shared-memory segments (Linux ``memfd``), which the main
process maps once, when the segment first arrives: afterwards only the layout crosses, and
neither process maps, faults in or frees memory per batch. A segment holds one batch at a
time; the main process hands it back when the last array or tensor over it goes, and the
worker reuses it from then on. With every segment still held (``_SEGMENTS`` per worker) or
without memfd, a batch goes through shared memory of its own, as torch shares storages.
A worker that ends frees the memory of the segments the main process no longer holds, the
main process the rest as it drops them; of a worker killed before it could, the main process
unmaps the segments when it drops a batch of that worker or maps a new segment.
"""

from __future__ import annotations

import ctypes
import io
import itertools
import mmap
import os
import pickle

import numpy as np

from . import _native
from .bytes_column import BytesColumn

_ALIGN = 64  # every part starts aligned, so views of any dtype are aligned
_SHM_MIN = 1 << 20  # a batch no segment takes: from this size in shared memory of its own
# A packed batch is one buffer plus a layout: a tree of tuples (tag, ...) that pickles at C
# speed. Dicts, lists and tuples are walked; arrays, tensors and bytes values become parts of
# the buffer; scalars stay in the tree; any other object is pickled apart, its own arrays
# still going into the buffer. Nodes from _LIST on carry a serial number after the tag: the
# main process builds each once, however often the batch holds it.
_DICT, _TUPLE, _NAMED, _OBJECT, _LIST, _PICKLED, _ARRAY, _TENSOR, _VALUES, _COLUMN = range(10)
_SCALARS = frozenset([int, float, str, bytes, bool, type(None)])


class _Packer:
    """Walks a structure into its layout, setting aside the parts to copy into one buffer."""

    def __init__(self):
        import torch

        self.tensor = torch.Tensor
        self.parts: list = []  # (offset, uint8 array or list of bytes to copy there)
        self.size = 0
        self.seen: dict = {}  # id(obj) -> (node, obj): a part met twice is one part

    def node(self, obj):
        kind = type(obj)
        if kind is dict:
            return (_DICT, tuple(obj), tuple(map(self.node, obj.values())))
        if kind is tuple:
            return (_TUPLE, tuple(map(self.node, obj)))
        if kind in _SCALARS:
            return (_OBJECT, obj)
        if isinstance(obj, tuple) and hasattr(kind, "_fields"):
            return (_NAMED, kind, tuple(map(self.node, obj)))
        got = self.seen.get(id(obj))
        if got is None:  # the object is kept too: a temporary's id could be reused
            tag, *rest = self._part(obj, kind)
            got = self.seen[id(obj)] = ((tag, len(self.seen), *rest) if tag >= _LIST else (tag, *rest), obj)
        return got[0]

    def _part(self, obj, kind):
        if kind is list:
            lengths = _native.spans.value_lengths(obj)
            return (_LIST, tuple(map(self.node, obj))) if lengths is None else self._values(obj, lengths, None)
        if kind is self.tensor:
            try:  # refused for GPU, sparse and grad-requiring tensors and dtypes numpy lacks
                return self._array(_TENSOR, obj.numpy())
            except (TypeError, RuntimeError):
                return (_OBJECT, obj)  # torch's own pickling shares them
        if kind is BytesColumn:
            values, offsets = obj._spanned()  # a dataset's batch is a slice of its task's buffer
            return (_COLUMN, self.node(values), self.node(offsets), obj.shape)
        if kind is np.ndarray:
            if obj.dtype.hasobject:
                values = obj.reshape(-1).tolist()
                lengths = _native.spans.value_lengths(values)
                if lengths is not None:
                    return self._values(values, lengths, obj.shape)
            elif obj.dtype.fields is None and obj.dtype.itemsize:  # not structured or empty
                return self._array(_ARRAY, obj)
        data = io.BytesIO()
        _Apart(data, self, obj).dump(obj)
        return (_PICKLED, data.getvalue())

    def _place(self, nbytes: int, source) -> int:
        offset = self.size
        self.size += -(-nbytes // _ALIGN) * _ALIGN
        self.parts.append((offset, source))
        return offset

    def _values(self, values: list, lengths, shape):
        """Bytes values back to back, then their int64 offsets."""
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        at = self._place(int(offsets[-1]), values)
        return (_VALUES, at, self._place(offsets.nbytes, offsets.view(np.uint8)), len(values), shape)

    def _array(self, tag, array: np.ndarray):
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return (tag, self._place(array.nbytes, array.reshape(-1).view(np.uint8)), array.dtype.str, array.shape)

    def fill(self, buffer: np.ndarray) -> None:
        """Copy every part set aside into buffer."""
        for offset, source in self.parts:
            if type(source) is list:
                _native.spans.copy_values(source, buffer, offset)
            else:
                buffer[offset:offset + source.nbytes] = source


class _Apart(pickle.Pickler):
    """Pickles an object the walk does not know (a class of the user's, an object array),
    sending the arrays, tensors and bytes values in it to the packer's buffer."""

    def __init__(self, file, packer: _Packer, root):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.packer, self.root = packer, root

    def persistent_id(self, obj):
        kind = type(obj)
        if obj is self.root or (kind is not np.ndarray and kind is not self.packer.tensor
                                and kind is not list and kind is not BytesColumn):
            return None
        node = self.packer.node(obj)
        return None if node[0] == _OBJECT else node


def _pack(obj):
    """The reduce value of a packed batch: the function that rebuilds it and its arguments."""
    packer = _Packer()
    layout = packer.node(obj)
    if packer.size >= _POOL_MIN:
        pool = _worker_pool()
        segment = pool.take(packer.size) if pool is not None else None
        if segment is not None:
            try:
                packer.fill(segment.data)
            except BaseException:
                segment.words[0] = 0
                raise
            return _unpack_pooled, (pool.pid, segment.fd, pool.token, segment.serial, segment.size, layout)
    if packer.size >= _SHM_MIN:
        import torch

        # Shared memory of its own (the one copy is the fill), found by its name as torch's
        # "file_system" sharing does: no descriptor handshake with this process.
        storage = torch.UntypedStorage._new_using_filename_cpu(packer.size)
        buffer = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
        manager, handle, size = storage._share_filename_cpu_()
        storage._shared_incref()  # the main process's rebuild drops this reference
        payload = (manager, handle, size)
    else:
        payload = buffer = np.empty(packer.size, dtype=np.uint8)
    packer.fill(buffer)
    return _unpack, (payload, layout)


class _Unpacker:
    def __init__(self, buffer: np.ndarray):
        import torch

        self.buffer = buffer
        self.from_numpy = torch.from_numpy
        self.built: dict = {}  # a part's serial number -> the part: one object however often met

    def build(self, node):
        tag = node[0]
        if tag == _DICT:
            return dict(zip(node[1], map(self.build, node[2])))
        if tag == _TUPLE:
            return tuple(map(self.build, node[1]))
        if tag == _NAMED:
            return node[1](*map(self.build, node[2]))
        if tag == _OBJECT:
            return node[1]
        got = self.built.get(node[1])
        if got is None:
            got = self.built[node[1]] = self._part(node)
        return got

    def _part(self, node):
        tag, buffer = node[0], self.buffer
        if tag == _LIST:
            return list(map(self.build, node[2]))
        if tag == _PICKLED:
            loader = pickle.Unpickler(io.BytesIO(node[2]))
            loader.persistent_load = self.build
            return loader.load()
        if tag == _COLUMN:
            return BytesColumn(self.build(node[2]), self.build(node[3]), node[4])
        if tag == _VALUES:
            _, _, at, offsets_at, n, shape = node
            items = _native.spans.split_values(buffer[at:], np.ndarray(n + 1, np.int64, buffer, offsets_at))
            return items.tolist() if shape is None else items.reshape(shape)
        _, _, at, dtype, shape = node
        array = np.ndarray(shape, dtype, buffer, at)
        return array if tag == _ARRAY else self.from_numpy(array)


def _unpack(payload, layout):
    if type(payload) is tuple:
        import torch
        from torch.multiprocessing.reductions import rebuild_storage_filename

        storage = rebuild_storage_filename(torch.UntypedStorage, *payload)
        payload = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
    return _Unpacker(payload).build(layout)


class _Packed:
    """A dict or list that crosses processes packed (module doc); a copy stays packed (torch's
    default_convert copies a batch), the main process gets the plain dict or list."""

    __slots__ = ()
    _plain: type

    def __copy__(self):
        return type(self)(self)

    def __reduce__(self):
        return _pack(self._plain(self))


class _PackedDict(_Packed, dict):
    __slots__ = ()
    _plain = dict


class _PackedList(_Packed, list):
    __slots__ = ()
    _plain = list


class _PackedArray(np.ndarray):
    """An object array (a raw batch) that crosses packed: a view of it, still an array to a
    collate_fn, which torch's default_convert passes on as it is (not being numpy's own
    type); the main process gets the plain array."""

    def __reduce__(self):
        return _pack(self.view(np.ndarray))

    def __reduce_ex__(self, protocol):  # ndarray's own would pickle the items one by one
        return self.__reduce__()


def _packed(item):
    kind = type(item)
    if kind is np.ndarray and item.dtype.hasobject:
        return item.view(_PackedArray)
    return _PackedDict(item) if kind is dict else _PackedList(item) if kind is list else item


# -- the worker's segments and the main process's view of them ----------------------------------

_POOL_MIN = 1 << 16  # from this size (a pipe's capacity) a batch crosses in a segment
_SEGMENTS = 8  # per worker: the batches in flight (prefetch) and a few the main process holds
_HEADER = 64  # a segment's two int32 words (held, retired), then its batch
_GRAIN = 1 << 16  # segment sizes: a multiple of this, a quarter over the batch that asked


class _Segment:
    """A worker's memfd: ``words[0]`` is 1 from the worker's fill until the main process drops
    the batch, ``words[1]`` is 1 once the worker lets the segment go."""

    __slots__ = ("fd", "size", "serial", "map", "words", "data")

    def __init__(self, size: int, serial: int):
        self.fd = os.memfd_create("tfrecord_lite-batch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.size, self.serial = size, serial
        self.words = np.frombuffer(self.map, np.int32, 2)
        self.data = np.frombuffer(self.map, np.uint8, size - _HEADER, _HEADER)

    def retire(self) -> None:
        """Its memory goes now if the main process does not hold the batch, else when it drops
        it (the main process's mapping is the last reference then)."""
        self.words[1] = 1
        if not _native.framing.load_acquire(self.map, 0):
            os.ftruncate(self.fd, _HEADER)
        os.close(self.fd)


class _Pool:
    """The segments of one worker process, reused batch after batch."""

    def __init__(self):
        from multiprocessing import util

        self.pid = os.getpid()
        self.token = os.urandom(8)  # tells a worker from an earlier one with the same pid
        self.segments: list[_Segment] = []
        self.serials = itertools.count()
        util.Finalize(self, self.close, exitpriority=0)  # as the worker process ends

    def take(self, nbytes: int) -> _Segment | None:
        """The smallest free segment for nbytes, marked held; a new one while there are fewer
        than _SEGMENTS (the smallest free one makes room), None when all are held."""
        free = [s for s in self.segments if not _native.framing.load_acquire(s.map, 0)]
        fits = [s for s in free if s.size - _HEADER >= nbytes]
        if fits:
            segment = min(fits, key=lambda s: s.size)
        else:
            if len(self.segments) >= _SEGMENTS:
                if not free:
                    return None
                smallest = min(free, key=lambda s: s.size)
                self.segments.remove(smallest)
                smallest.retire()
            size = -(-(_HEADER + nbytes + nbytes // 4) // _GRAIN) * _GRAIN
            segment = _Segment(size, next(self.serials))
            self.segments.append(segment)
        segment.words[0] = 1
        return segment

    def close(self) -> None:
        for segment in self.segments:
            segment.retire()
        self.segments.clear()


_pool: _Pool | None = None


def _worker_pool() -> _Pool | None:
    """This process's pool (a forked child makes its own); None without memfd (not Linux)."""
    global _pool
    if not hasattr(os, "memfd_create"):
        return None
    if _pool is None or _pool.pid != os.getpid():
        _pool = _Pool()
    return _pool


class _Mapped:
    """A worker's segment as this process maps it, once, for every batch it brings."""

    __slots__ = ("map", "words", "pid", "lease")

    def __init__(self, pid: int, fd: int, size: int):
        try:
            # The worker's own descriptor, opened anew: no handshake with the worker.
            local = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
        except OSError as e:
            raise RuntimeError(f"cannot map the batches of DataLoader worker {pid} through /proc/{pid}/fd "
                               f"({e}): workers must run as this user, with /proc mounted") from e
        try:
            self.map = mmap.mmap(local, size)
        finally:
            os.close(local)
        self.words = np.frombuffer(self.map, np.int32, 2)
        self.pid = pid
        self.lease = type("_Lease", (ctypes.c_ubyte * (size - _HEADER),), {"__del__": _release})


_mapped: dict = {}  # (worker token, serial) -> _Mapped


def _alive(pid: int, kill=os.kill) -> bool:
    try:
        kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _forget(mapped=_mapped, alive=_alive) -> None:
    """Drop the segments let go of: retired by their worker, or of a worker that is gone (torch
    ends a worker that is slow to stop with SIGTERM, and it then skips its exit handlers). The
    memory of each goes with its last lease."""
    for key, segment in list(mapped.items()):  # a copy: the pin-memory thread may map one meanwhile
        if segment.words[1] or not alive(segment.pid):
            mapped.pop(key, None)


def _release(lease, getpid=os.getpid, alive=_alive, forget=_forget, store=_native.framing.store_release):
    """The last array over a batch is gone: its segment goes back to the worker. A forked
    child's copy of the lease is not the batch, so only the process that made it releases.
    (What it calls is bound here: a batch held to the end is released as the interpreter
    clears the modules.)"""
    if lease.pid == getpid():
        segment = lease.mapped
        # Ordered after every read of the batch: the worker may overwrite it from then on.
        store(segment.map, 0, 0)
        if segment.words[1] or not alive(segment.pid):
            forget()


def _unpack_pooled(pid, fd, token, serial, size, layout):
    key = (token, serial)
    mapped = _mapped.get(key)
    if mapped is None:
        _forget()
        mapped = _mapped[key] = _Mapped(pid, fd, size)
    lease = mapped.lease.from_buffer(mapped.map, _HEADER)
    lease.mapped, lease.pid = mapped, os.getpid()
    return _Unpacker(np.frombuffer(lease, np.uint8)).build(layout)
