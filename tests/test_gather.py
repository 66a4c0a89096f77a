"""The index-array interleave: Gathered's slicing, joining and rounds, the RecordBatches it
makes, and TFRecordDataset's outputs in TF's interleave order whatever the cycle, block,
batch, threads and sharding (checked against the record-by-record path that unbatched raw
output still takes, which the interop tests hold to tf.data's order)."""

import contextlib
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tfrecord_lite._gather import Gathered
from tfrecord_lite.batch import BlockOrigin, RecordBatch

from ._records import write_files

SPEC = {"id": tfl.FixedLenFeature([], np.int64)}
COUNTS = [9000, 0, 1, 5000, 4500, 37, 300]


def _blocks(records_per_block, pad=0):
    """RecordBatches over real frame blocks, records numbered across them (``pad`` bytes
    longer each)."""
    out, k = [], 0
    for n in records_per_block:
        frames = _native.framing.encode_frames([b"r%d-" % (k + i) + b"x" * ((k + i) % 7 + pad) for i in range(n)])
        frames, starts, lengths, *_ = _native.framing.scan_block(frames)
        out.append(tfl.RecordBatch(frames, starts, lengths, framed=True))
        k += n
    return out


def _index_part(data, j, n):
    """An int64 part of n entries as the index arrays come: contiguous, a strided view (a
    sharded piece), or a field of packed records (entries 12 bytes apart, unaligned)."""
    step = data.draw(st.integers(-2, 3).filter(bool))
    values = np.arange(1000 * j, 1000 * j + n * abs(step), dtype=np.int64)[::step]
    if data.draw(st.booleans()):
        rows = np.zeros(len(values), np.dtype([("pad", "i4"), ("v", "i8")]))  # itemsize 12
        rows["v"] = values
        values = rows["v"]
    return values


@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 6), st.integers(1, 4), st.data())
def test_interleave_takes_a_block_of_each_part_in_turn(backend, parts, block, rounds, k, data):
    """k columns (a gathered batch's which, starts, lengths, index), the first one's parts
    shifted by their offsets; parts of any layout, each column's its own."""
    extra = data.draw(st.integers(0, parts))
    # Parts hold at least what they give; longer is fine.
    columns = [[_index_part(data, j, rounds * block + (block if j < extra else 0) + data.draw(st.integers(0, 3)))
                for j in range(parts)] for _ in range(k)]
    add = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=parts, max_size=parts)), np.int64)
    order = [(j, r * block + i) for r in range(rounds) for j in range(parts) for i in range(block)]
    order += [(j, rounds * block + i) for j in range(extra) for i in range(block)]
    want = [[int(column[j][i]) for j, i in order] for column in columns]
    got = _native.spans.interleave(columns, block, rounds, extra)
    assert [a.tolist() for a in got] == want and all(a.dtype == np.int64 for a in got)
    want[0] = [v + int(add[j]) for v, (j, _) in zip(want[0], order)]
    assert [a.tolist() for a in _native.spans.interleave(columns, block, rounds, extra, add)] == want


@pytest.mark.parametrize("block, extra, step", [(1, 0, 1), (1, 7, 1), (3, 5, 1), (1, 3, 2)])
def test_interleave_of_whole_rounds_of_many_parts(backend, block, extra, step):
    """Rounds of 16 pieces' index arrays (as 16 files at 4,096 records a piece make), which the
    core interleaves without the GIL; contiguous parts, and strided views."""
    m, rounds = 16, 4096 // block
    arrays = [np.arange(j << 20, (j << 20) + (rounds * block + block) * step, dtype=np.int64)[::step]
              for j in range(m)]
    add = np.arange(m, dtype=np.int64) * 7
    whole = np.stack([a[:rounds * block].reshape(rounds, block) for a in arrays], axis=1)
    want = np.concatenate([whole.ravel(), *[arrays[j][rounds * block:][:block] for j in range(extra)]])
    shift = np.concatenate([np.tile(add, rounds * block // block).reshape(rounds, m, 1).repeat(block, 2).ravel(),
                            np.repeat(add[:extra], block)])
    got = _native.spans.interleave([arrays, arrays[::-1]], block, rounds, extra, add)
    assert got[0].tolist() == (want + shift).tolist()
    assert got[1].tolist() == np.concatenate([
        np.stack([a[:rounds * block].reshape(rounds, block) for a in arrays[::-1]], axis=1).ravel(),
        *[arrays[::-1][j][rounds * block:][:block] for j in range(extra)]]).tolist()


@pytest.mark.parametrize("call, match", [
    (lambda f, a: f([[a, a]], 0, 1, 0), "do not describe"),
    (lambda f, a: f([[a, a]], 1, -1, 0), "do not describe"),
    (lambda f, a: f([[a, a]], 1, 1, 3), "do not describe"),
    (lambda f, a: f([[a, a[:1]]], 2, 1, 0), "part 1 has 1 entries, not 2"),
    (lambda f, a: f([[a, a], [a, a[:3]]], 1, 4, 0), "part 1 has 3 entries, not 4"),
    (lambda f, a: f([[a, a]], 2, 2, 1), "part 0 has 4 entries, not 6"),
    (lambda f, a: f([[a, a]], 1, 1, 0, np.zeros(3, np.int64)), "3 offsets for 2 parts"),
    (lambda f, a: f([[a, a], [a]], 1, 1, 0), "column 1 has 1 parts, column 0 2"),
])
def test_interleave_rejects_what_its_parts_cannot_give(backend, call, match):
    with pytest.raises(tfl.InvalidArgumentError, match=match):
        call(_native.spans.interleave, np.arange(4, dtype=np.int64))


@given(st.lists(st.integers(0, 6), max_size=5), st.integers(1, 4), st.booleans(), st.data())
def test_concat_joins_parts_adding_each_its_offset(backend, sizes, k, with_add, data):
    columns = [[_index_part(data, j, n) for j, n in enumerate(sizes)] for _ in range(k)]
    add = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=len(sizes), max_size=len(sizes))), np.int64)
    want = [[int(v) for a in column for v in a] for column in columns]
    if with_add:
        want[0] = [int(v) + int(add[j]) for j, a in enumerate(columns[0]) for v in a]
    got = _native.spans.concat(columns, add if with_add else None)
    assert [a.tolist() for a in got] == want and all(a.dtype == np.int64 for a in got)


def test_concat_of_whole_pieces_and_its_errors(backend):
    """Parts large enough that the core copies them without the GIL; parts and offsets that
    disagree."""
    a, b = np.arange(6000, dtype=np.int64), np.arange(5000, dtype=np.int64)[::-1]
    got = _native.spans.concat([[a, b], [2 * a, b[::2].repeat(2)]], np.array([3, -4], np.int64))
    assert got[0].tolist() == (a + 3).tolist() + (b - 4).tolist()
    assert got[1].tolist() == (2 * a).tolist() + b[::2].repeat(2).tolist()
    with pytest.raises(tfl.InvalidArgumentError, match="part 0 has 6000 entries in column 0, 5000 in column 1"):
        _native.spans.concat([[a, a], [b, a]])
    assert [c.tolist() for c in _native.spans.concat([[a[:0]], [b[:0]]])] == [[], []]
    assert _native.spans.concat([]) == ()
    with pytest.raises(tfl.InvalidArgumentError, match="3 offsets for 2 parts"):
        _native.spans.concat([[a, b]], np.zeros(3, np.int64))
    with pytest.raises(tfl.InvalidArgumentError, match="column 1 has 1 parts, column 0 2"):
        _native.spans.concat([[a, b], [a]])


@given(st.lists(st.integers(0, 3), max_size=40), st.one_of(st.none(), st.integers(0, 40)))
def test_run_starts_lists_where_runs_begin_up_to_a_bound(backend, which, most):
    which = np.array(which, np.int64)
    want = [i for i in range(1, len(which)) if which[i] != which[i - 1]]
    got = _native.spans.run_starts(which, most)
    if most is not None and len(want) > most:
        assert got is None
    else:
        assert got.dtype == np.int64 and got.tolist() == want


def test_run_starts_of_a_whole_piece_and_its_errors(backend):
    """An interleave of two files one record at a time (a change at every entry) and long
    runs, large enough that the core scans them without the GIL."""
    alternating = np.tile(np.array([0, 1], np.int64), 8192)
    assert _native.spans.run_starts(alternating, 255) is None
    assert _native.spans.run_starts(alternating[::2], 0).tolist() == []  # a strided view: one run
    assert _native.spans.run_starts(alternating).tolist() == list(range(1, len(alternating)))
    runs = np.repeat(np.arange(5, dtype=np.int64), 4000)
    assert _native.spans.run_starts(runs, 4).tolist() == [4000, 8000, 12000, 16000]
    assert _native.spans.run_starts(runs, 3) is None
    with pytest.raises(tfl.InvalidArgumentError, match="most must be 0 or more, not -1"):
        _native.spans.run_starts(runs, -1)


@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=6), max_size=6), st.data())
def test_run_steps_gives_each_runs_step_when_it_has_one(backend, runs, data):
    """Runs drawn as progressions (any first entry and step, a record cut out or moved or
    not) against a plain loop."""
    index, bounds = [], [0]
    for run in runs:
        first, step = data.draw(st.integers(0, 50)), data.draw(st.integers(-2, 3))
        values = [first + step * k for k in range(len(run))]
        if len(values) > 2 and data.draw(st.booleans()):
            values[data.draw(st.integers(1, len(values) - 1))] += data.draw(st.integers(-2, 2))
        index += values
        bounds.append(len(index))

    def step_of(values):
        diffs = {b - a for a, b in zip(values, values[1:])} or {1}
        return diffs.pop() if len(diffs) == 1 and min(diffs) > 0 else 0

    got = _native.spans.run_steps(np.array(index, np.int64), np.array(bounds, np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == [step_of(index[a:z]) for a, z in zip(bounds, bounds[1:])]


def test_run_steps_rejects_runs_outside_the_index(backend):
    index = np.arange(5, dtype=np.int64)
    for bounds, match in [([], "at least one entry"), ([0, 6], r"run 0 is \[0, 6\) of 5"),
                          ([0, 2, 2], r"run 1 is \[2, 2\)"), ([-1, 3], r"run 0 is \[-1, 3\)")]:
        with pytest.raises(tfl.InvalidArgumentError, match=match):
            _native.spans.run_steps(index, np.array(bounds, np.int64))
    assert _native.spans.run_steps(index, np.array([0], np.int64)).tolist() == []


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(-2, 3).filter(bool), st.integers(0, 10**12),
                          st.integers(1, 5)), max_size=5))
def test_join_runs_numbers_each_run_record(backend, runs):
    # Runs as a piece's reads give them: strided views (sharded records) of any length.
    starts, lengths, firsts, steps, want = [], [], [], [], ([], [], [], [])
    for j, (n, stride, first, step) in enumerate(runs):
        s = np.arange(100 * j, 100 * j + n * abs(stride), dtype=np.int64)[::stride]
        starts.append(s)
        lengths.append(s * 3)
        firsts.append(first)
        steps.append(step)
        for k in range(n):
            for out, value in zip(want, (j, s[k], 3 * s[k], first + k * step)):
                out.append(int(value))
    got = _native.spans.join_runs(starts, lengths, firsts, steps)
    assert [a.tolist() for a in got] == list(want)
    assert all(a.dtype == np.int64 for a in got)


@given(st.lists(st.integers(0, 50), min_size=0, max_size=20), st.integers(1, 3), st.data())
def test_frames_tile_says_whether_frames_lie_back_to_back(backend, lengths, stride, data):
    # A writer copies a framed batch's run verbatim only when its frames tile it exactly.
    starts = (12 + np.concatenate([[0], np.cumsum(np.array(lengths, np.int64) + 16)]))[:len(lengths)].astype(np.int64)
    spread = np.repeat(starts, stride)[::stride]  # a strided view of the same values
    lengths = np.array(lengths, np.int64)
    assert _native.spans.frames_tile(spread, lengths) is True
    assert _native.spans.frames_tile(starts.astype(np.int32), lengths.tolist()) is True  # any integers
    if len(lengths) > 1:
        j = data.draw(st.integers(1, len(lengths) - 1))
        moved = starts.copy()
        moved[j] += data.draw(st.sampled_from([-1, 1, 5]))
        assert _native.spans.frames_tile(moved, lengths) is False
        with _native.use(backend.other):
            assert _native.spans.frames_tile(moved, lengths) is False
    with pytest.raises(tfl.InvalidArgumentError, match="starts and"):
        _native.spans.frames_tile(starts, np.append(lengths, 1))


def test_join_runs_of_a_whole_piece_matches_the_other_backend(backend):
    # A piece's worth of records (24,383): the core writes them without the GIL.
    rng = np.random.default_rng(5)
    spread = rng.integers(0, 2**40, 3 * 16_384)
    runs = [spread[:12_000], spread[12_000:20_000][::2], spread[20_000:][::-3][:8_383]]
    args = ([r.copy() if j == 0 else r for j, r in enumerate(runs)], [r // 7 for r in runs], [0, 5, 2**33], [1, 2, 7])
    got = _native.spans.join_runs(*args)
    with _native.use(backend.other):
        want = _native.spans.join_runs(*args)
    assert [len(a) for a in got] == [12_000 + 4_000 + 8_383] * 4
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert got[3][12_000] == 5 and got[3][-1] == 2**33 + 7 * (len(runs[2]) - 1)


def test_join_runs_rejects_runs_that_disagree(backend):
    a = np.arange(3, dtype=np.int64)
    with pytest.raises(tfl.InvalidArgumentError, match="run 1 has 3 starts and 2 lengths"):
        _native.spans.join_runs([a, a], [a, a[:2]], [0, 0], [1, 1])
    with pytest.raises(tfl.InvalidArgumentError, match="2 starts, 1 lengths"):
        _native.spans.join_runs([a, a], [a], [0, 0], [1, 1])


@given(st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=3), min_size=1, max_size=4), st.integers(1, 5),
       st.data())
def test_rounds_interleave_whole_blocks(backend, sizes, block, data):
    # Parts of one to three read blocks each, every block with its origin: the records and
    # where each came from follow TF's order.
    blocks = _blocks([n for part in sizes for n in part])
    blocks = [tfl.RecordBatch(*b.segments[0], framed=True, origin=BlockOrigin(f"f{j}", 100 * j, 10 * j))
              if len(b) else b for j, b in enumerate(blocks)]
    pieces, at = [], 0
    for part in sizes:
        pieces.append(tfl.RecordBatch.concat(blocks[at:at + len(part)]))
        at += len(part)
    rounds = min(len(p) for p in pieces) // block
    extra = data.draw(st.integers(0, sum(len(p) - rounds * block >= block for p in pieces)))
    extra = min(extra, next((j for j, p in enumerate(pieces) if len(p) - rounds * block < block), len(pieces)))
    parts = [p[:rounds * block + (block if j < extra else 0)] for j, p in enumerate(pieces)]
    order = [(j, r * block + i) for r in range(rounds) for j in range(len(parts)) for i in range(block)]
    order += [(j, rounds * block + i) for j in range(extra) for i in range(block)]
    got = Gathered.rounds([Gathered.of(p) for p in parts], block, rounds, extra)
    assert list(got.to_batch()) == [parts[j][i] for j, i in order]
    assert [got.locate(k) for k in range(len(got))] == [parts[j].locate(i) for j, i in order]
    cut = data.draw(st.integers(0, len(got)))
    joined = Gathered.join([got[:cut], got[cut:]]).to_batch()
    assert list(joined) == list(got.to_batch())


@given(st.lists(st.integers(0, 40), min_size=0, max_size=5), st.data())
def test_to_numpy_gives_the_records_in_any_layout(backend, sizes, data):
    """One block, several, none, or records in any order of several (the core's
    split_records, the same on both backends)."""
    batch = tfl.RecordBatch.concat(_blocks(sizes))
    want = list(batch)
    got = batch.to_numpy()
    assert got.dtype == object and got.shape == (len(want),) and got.tolist() == want
    flat = Gathered.of(batch)
    order = np.array(data.draw(st.lists(st.integers(0, max(0, len(batch) - 1)), max_size=60))
                     if len(batch) else [], np.int64)
    picked = flat.take(order).to_batch()
    assert picked.to_numpy().tolist() == [want[i] for i in order.tolist()]
    with _native.use(backend.other):
        theirs = _native.spans.split_records(flat.buffers, flat.which, flat.starts, flat.lengths)
    assert theirs.tolist() == want


@pytest.mark.parametrize("which, start, length", [(1, 0, 1), (-1, 0, 1), (0, -1, 1), (0, 0, -1), (0, 5, 1), (0, 0, 6)])
def test_split_records_rejects_records_outside_their_buffer(backend, which, start, length):
    a = np.array
    with pytest.raises(tfl.InvalidArgumentError, match="outside its buffer"):
        _native.spans.split_records([b"12345"], a([which], np.int64), a([start], np.int64), a([length], np.int64))
    with pytest.raises(tfl.InvalidArgumentError, match="same length"):
        _native.spans.split_records([b"12345"], a([0, 0], np.int64), a([0], np.int64), a([1], np.int64))


def test_long_runs_stay_in_their_blocks():
    blocks = _blocks([500, 500])
    batch = Gathered.join([Gathered.of(b) for b in blocks]).to_batch()
    assert [s[0] for s in batch.segments] == [b.segments[0][0] for b in blocks] and batch.framed
    assert batch._gathered is None  # plain segments


def test_long_runs_keep_their_blocks_origins(backend):
    """Runs of every step-th record of a file (a file read in order, sharded or not) come out
    as a BlockOrigin each, which a RecordBatch made of them keeps through Gathered.of; a run
    out of order (a shuffle's) gets its records' origins. Either way, locate agrees."""
    blocks = [tfl.RecordBatch(*b.segments[0], framed=True, origin=BlockOrigin(f"f{j}", 1000 * j, 7 * j, 1 + j))
              for j, b in enumerate(_blocks([300, 300]))]
    batch = Gathered.join([Gathered.of(b)[:200] for b in blocks]).to_batch()
    assert batch.origins == [BlockOrigin("f0", 0, 0, 1), BlockOrigin("f1", 1000, 7, 2)]
    want = [blocks[0].locate(k) for k in range(200)] + [blocks[1].locate(k) for k in range(200)]
    assert [batch.locate(i) for i in range(400)] == want
    again = Gathered.of(batch[100:300])
    assert again.index is not None and [again.locate(i) for i in range(200)] == want[100:300]
    order = np.r_[np.arange(200), 200 + np.random.default_rng(1).permutation(200)]
    mixed = Gathered.join([Gathered.of(b)[:200] for b in blocks]).take(order).to_batch()
    assert type(mixed.origins[0]) is BlockOrigin and type(mixed.origins[1]) is not BlockOrigin
    assert [mixed.locate(i) for i in range(400)] == [want[k] for k in order]


@pytest.mark.parametrize("pad", [0, 32 << 10])
def test_short_runs_stay_in_their_blocks_in_any_order(backend, tmp_path, pad):
    """Records alternating between blocks (one-record runs): the RecordBatch holds them in
    place, in order, as index arrays, and behaves as any other: indexing, slicing, joining,
    equality, its runs as segments with their origins, locating a record, pickling,
    parsing and writing."""
    blocks = [tfl.RecordBatch(*b.segments[0], framed=True, origin=BlockOrigin(f"f{j}", 1000 * j, 7 * j))
              for j, b in enumerate(_blocks([20, 20, 20], pad=pad))]
    want = [r for trio in zip(*blocks) for r in trio]
    batch = Gathered.rounds([Gathered.of(b) for b in blocks], 1, 20, 0).to_batch()
    assert type(batch) is tfl.RecordBatch and batch._gathered is not None and batch.framed
    assert list(batch) == want and batch == want and len(batch) == 60 and repr(batch) == \
        "RecordBatch(60 records in 3 blocks)"
    assert batch.to_numpy().tolist() == want
    assert [batch[i] for i in (0, 1, 59, -1, -60)] == [want[i] for i in (0, 1, 59, -1, -60)]
    with pytest.raises(IndexError):
        batch[60]
    assert batch.nbytes == sum(map(len, want))
    for cut in (slice(3, 50), slice(None, None, 4), slice(7, 8), slice(50, 3), slice(None, None, -3)):
        assert list(batch[cut]) == want[cut]
    assert list(batch[10:] + blocks[0]) == want[10:] + list(blocks[0])
    assert list(tfl.RecordBatch.concat([blocks[1][:5], batch[:7]])) == list(blocks[1][:5]) + want[:7]
    # No copy: the runs are the blocks' own bytes.
    assert len(batch.segments) == 60
    assert [id(s[0]) for s in batch.segments[:3]] == [id(b.segments[0][0]) for b in blocks]
    sources = [(j, k) for k in range(20) for j in range(3)]
    assert [batch.locate(i) for i in range(60)] == [blocks[j].locate(k) for j, k in sources]
    assert batch.origins == [BlockOrigin(f"f{j}", 1000 * j, 7 * j + k) for j, k in sources]  # runs of one
    again = pickle.loads(pickle.dumps(batch[5:]))
    assert again == want[5:] and again.locate(0) == batch.locate(5)
    examples = [tfl.encode_example({"id": k}) for k in range(60)]
    eblocks = [tfl.RecordBatch(*_native.framing.scan_block(_native.framing.encode_frames(examples[j::3]))[:3])
               for j in range(3)]
    ebatch = Gathered.rounds([Gathered.of(b) for b in eblocks], 1, 20, 0).to_batch()
    assert tfl.parse_example(ebatch, SPEC)["id"].tolist() == list(range(60))
    with tfl.TFRecordWriter(str(tmp_path / "out.tfrecord")) as w:
        w.write_many(batch[1:])
    assert list(tfl.TFRecordReader(str(tmp_path / "out.tfrecord"))) == want[1:]


def _example_blocks(sizes):
    """RecordBatches over frame blocks of Examples, record k of them all with id k and a
    bytes value of k % 11 bytes."""
    records = [tfl.encode_example({"id": k, "b": b"v" * (k % 11)}) for k in range(sum(sizes))]
    out, k = [], 0
    for n in sizes:
        frames, starts, lengths, *_ = _native.framing.scan_block(_native.framing.encode_frames(records[k:k + n]))
        out.append(tfl.RecordBatch(frames, starts, lengths, framed=True))
        k += n
    return out, records


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=4), st.data())
def test_the_parsers_read_gathered_records_where_they_lie(backend, sizes, data):
    """parse_example over a Gathered (any records of several blocks, in any order) gives
    what it gives over those records as bytes, on both backends; indexing and iterating a
    Gathered give those bytes too."""
    blocks, records = _example_blocks(sizes)
    flat = Gathered.join([Gathered.of(b) for b in blocks])
    order = np.array(data.draw(st.lists(st.integers(0, len(records) - 1), max_size=50)), np.int64)
    picked = flat._pick(order)
    want = [records[i] for i in order.tolist()]
    assert list(picked) == want and [picked[j] for j in range(-len(want), 0)] == want
    spec = {"id": tfl.FixedLenFeature([], np.int64), "b": tfl.FixedLenFeature([], bytes)}
    got = tfl.parse_example(picked, spec)
    assert got["id"].tolist() == order.tolist() and got["b"].tolist() == [b"v" * (i % 11) for i in order.tolist()]
    with _native.use(backend.other):
        theirs = tfl.parse_example(picked, spec)
    assert theirs["id"].tolist() == got["id"].tolist() and theirs["b"].tolist() == got["b"].tolist()


@pytest.mark.parametrize("which, start, length, match", [
    (1, 0, 1, "names block 1 of 1"), (-1, 0, 1, "names block -1 of 1"), (0, -1, 1, "lies outside"),
    (0, 0, -1, "lies outside"), (0, 5, 1, "lies outside"), (0, 0, 6, "lies outside")])
def test_the_parsers_reject_gathered_records_outside_their_blocks(backend, which, start, length, match):
    a = np.array
    bad = Gathered([b"12345"], a([which], np.int64), a([start], np.int64), a([length], np.int64), False)
    with pytest.raises(tfl.InvalidArgumentError, match=match):
        tfl.parse_example(bad, SPEC)
    uneven = Gathered([b"12345"], a([0, 0], np.int64), a([0], np.int64), a([1], np.int64), False)
    with pytest.raises(tfl.InvalidArgumentError, match="mismatched"):
        tfl.parse_example(uneven, SPEC)


@pytest.mark.parametrize("start, length", [(0, 6), (-1, 1), (3, -1), (5, 1)])
def test_the_parsers_reject_segment_records_outside_their_blocks(backend, start, length):
    # A RecordBatch's second segment, its second record: found wherever it lies.
    a = np.array
    bad = RecordBatch._of([(b"\x00", a([0], np.int64), a([0], np.int64)),
                           (b"12345", a([0, start], np.int64), a([1, length], np.int64))], None, False)
    with pytest.raises(tfl.InvalidArgumentError, match=rf"record \({start}, {length}\) lies outside its 5-byte"):
        tfl.parse_example(bad, SPEC)


def test_a_bad_example_read_in_place_names_its_file_offset_and_index(backend, tmp_path):
    """Records interleaved one by one from two files reach the parser in place; a record
    that does not fit the spec is named by its file, frame offset and index in that file."""
    paths = write_files(tmp_path, [50, 50], make=lambda f, j: tfl.encode_example(
        {"id": 1000 * f + j} if (f, j) != (1, 37) else {"id": [1, 2]}))
    got = []
    with pytest.raises(tfl.FeatureSpecError) as info:
        for b in tfl.TFRecordDataset(paths, SPEC, batch_size=10, num_threads=2, cycle_length=2):
            got.extend(b["id"].tolist())
    assert got == [1000 * f + j for j in range(35) for f in (0, 1)]  # the batches before the bad one's
    e = info.value
    assert (e.path, e.index, e.batch_index) == (paths[1], 37, 5)
    assert e.offset == tfl.index.scan_index(paths[1])[0][37]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("gather"), COUNTS,
                       make=lambda f, j: tfl.encode_example({"id": 100_000 * f + j, "pad": b"p" * (j % 300)}))


@settings(max_examples=25, deadline=None)
@given(cycle=st.sampled_from([2, 3, 7, 16]), block=st.sampled_from([1, 2, 5, 64, 1000]),
       batch=st.sampled_from([None, 1, 7, 1024]), threads=st.sampled_from([1, 2, 3]),
       shard=st.sampled_from([None, (1, 2), (0, 9)]), open_files=st.sampled_from([16, 64]),
       piece=st.sampled_from([None, 3, 50]))
def test_parsed_and_batched_raw_outputs_keep_the_interleave_order(backend, files, cycle, block, batch, threads, shard,
                                                                   open_files, piece):
    # piece: records a file's pieces are cut at (read batches split, the rest carried over).
    opts = dict(cycle_length=cycle, block_length=block, num_threads=threads, shard=shard, max_open_files=open_files)
    records = list(tfl.TFRecordDataset(files, **opts))  # one bytes object at a time
    want = [int(tfl.parse_example([r], SPEC)["id"][0]) for r in records]
    with _pieces(piece):
        parsed = tfl.TFRecordDataset(files, SPEC, batch_size=batch, **opts)
        assert [i for b in parsed for i in np.atleast_1d(b["id"]).tolist()] == want
        if batch is not None:
            raw = list(tfl.TFRecordDataset(files, batch_size=batch, **opts))
            assert all(type(b) is tfl.RecordBatch for b in raw)
            assert [r for b in raw for r in b] == records


def _pieces(records):
    """The dataset's pieces cut at this many records (None: as they are)."""
    from tfrecord_lite import _pipeline

    return contextlib.nullcontext() if records is None else mock.patch.object(_pipeline, "_PIECE_RECORDS", records)


@given(st.integers(1, 12), st.integers(0, 40), st.data())
def test_shuffle_step_is_the_sequential_buffer(size, n, data):
    from tfrecord_lite._gather import _shuffle_step, object_array

    slots = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)), np.int64)
    buf, records = [f"b{i}" for i in range(size)], [f"r{j}" for j in range(n)]
    want, state = [], list(buf)
    for record, slot in zip(records, slots.tolist()):
        want.append(state[slot])
        state[slot] = record
    out, left = _shuffle_step(object_array([buf]), object_array([records]), slots, object_array)
    assert out.tolist() == want and left.tolist() == state


@settings(max_examples=10, deadline=None)
@given(size=st.sampled_from([1, 7, 5000]), cycle=st.sampled_from([1, 3]), batch=st.sampled_from([1, 64]),
       seed=st.integers(0, 3))
def test_shuffle_buffer_window_and_same_order_on_every_path(backend, files, size, cycle, batch, seed):
    opts = dict(cycle_length=cycle, block_length=1, shuffle_buffer=size, seed=seed, num_threads=2)
    order = list(tfl.TFRecordDataset(files, cycle_length=cycle, block_length=1))
    position = {r: j for j, r in enumerate(order)}
    shuffled = list(tfl.TFRecordDataset(files, **opts))
    assert sorted(shuffled) == sorted(order) and (size == 1) == (shuffled == order)
    # TF's buffer: the j-th output is one of the first j + size inputs
    assert all(position[r] < j + size for j, r in enumerate(shuffled))
    assert [r for b in tfl.TFRecordDataset(files, batch_size=batch, **opts) for r in b] == shuffled
    ids = [int(tfl.parse_example([r], SPEC)["id"][0]) for r in shuffled]
    assert [i for b in tfl.TFRecordDataset(files, SPEC, batch_size=batch, **opts) for i in b["id"].tolist()] == ids
    assert list(tfl.TFRecordDataset(files, **{**opts, "seed": seed + 10})) != shuffled or size == 1


def test_take_and_long_joins_hold_each_block_their_records_use_once():
    blocks = [Gathered.of(b) for b in _blocks([3] * 100)]
    joined = Gathered.join(blocks)  # past 64 blocks a join drops those it does not use
    assert len(joined.buffers) == 100
    picked = joined.take(np.array([299, 0, 150]))
    assert len(picked.buffers) == 3 and list(picked.to_batch()) == [list(joined.to_batch())[i] for i in (299, 0, 150)]
    sliced = Gathered.join([b[:1] for b in blocks] + [joined[:3]] * 2)
    # The first block is met three times (its slice, and twice in joined[:3]) and listed once.
    assert len(sliced.buffers) == 100 and list(sliced.to_batch())[-6:] == list(joined.to_batch())[:3] * 2


@settings(max_examples=12, deadline=None)
@given(cycle=st.sampled_from([2, 3, 16]), block=st.sampled_from([1, 2, 33]), batch=st.sampled_from([1, 100, 1024]),
       threads=st.sampled_from([1, 2]), piece=st.sampled_from([None, 3, 50]), data=st.data())
def test_resume_inside_rounds_of_blocks(backend, files, cycle, block, batch, threads, piece, data):
    opts = dict(cycle_length=cycle, block_length=block, num_threads=threads, batch_size=batch, max_open_files=16)
    full = [i for b in tfl.TFRecordDataset(files, SPEC, **opts) for i in b["id"].tolist()]
    with _pieces(piece):
        ds = tfl.TFRecordDataset(files, SPEC, **opts)
        ds.state_dict()  # positions are tracked from here on
        it = iter(ds)
        head = [i for _ in range(data.draw(st.integers(1, len(full) // batch))) for i in next(it)["id"].tolist()]
        state = ds.state_dict()
        it.close()
    assert state["cursor"] is not None
    again = tfl.TFRecordDataset(files, SPEC, **opts)
    again.load_state_dict(state)
    assert head + [i for b in again for i in b["id"].tolist()] == full
