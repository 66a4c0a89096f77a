"""The tfrecord-lite command's input arguments and reading options, alike in every command:
globs and directories as FILE, --on-corrupt and its hints, to-parquet's --sample and --spec,
and how it ends on Ctrl-C."""

import json
import os

import pytest

import tfrecord_lite as tfl
from tfrecord_lite.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, records, compression=None):
    with tfl.TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return str(path)


def _examples(start, n):
    return [tfl.encode_example({"id": i, "name": f"n{i}"}) for i in range(start, start + n)]


@pytest.fixture
def parts(tmp_path):
    """data/ with three files (one gzip), an index sidecar and a hidden file."""
    d = tmp_path / "data"
    paths = [_write(d / "a.tfrecord", _examples(0, 3)), _write(d / "b.tfrecord.gz", _examples(3, 4), "gzip"),
             _write(d / "c.tfrecord", _examples(7, 5))]
    tfl.build_index(paths[0])
    (d / ".hidden").write_bytes(b"not a record file")
    return d, paths


@pytest.mark.parametrize("form", ["directory", "glob"])
def test_every_command_reading_files_takes_a_directory_or_a_glob(backend, parts, tmp_path, capfd, form):
    d, paths = parts
    arg = str(d) if form == "directory" else str(d / "*.tfrecord*")
    assert main(["count", arg]) == 0
    assert capfd.readouterr().out.splitlines() == [f"3\t{paths[0]}", f"4\t{paths[1]}", f"5\t{paths[2]}", "12\ttotal"]
    assert main(["verify", arg]) == 0
    assert capfd.readouterr().out.count("OK\t") == 3
    assert main(["head", arg, "-n", "1"]) == 0
    assert [line.split(":")[0] for line in capfd.readouterr().out.splitlines() if " record " in line] == \
        [f"{p}, record 0" for p in paths]
    assert main(["stats", arg]) == 0
    assert capfd.readouterr().out.startswith("12 records")
    assert main(["schema", arg, "--format", "python"]) == 0
    assert "'id'" in capfd.readouterr().out
    out = tmp_path / "all.tfrecord"
    assert main(["merge", arg, "-o", str(out)]) == 0
    assert len(list(tfl.TFRecordReader(str(out)))) == 12
    assert main(["cat", arg, "-o", str(tmp_path / "cat.tfrecord")]) == 0
    assert list(tfl.TFRecordReader(str(tmp_path / "cat.tfrecord"))) == list(tfl.TFRecordReader(str(out)))
    parquet = tmp_path / "all.parquet"
    assert main(["to-parquet", arg, "-o", str(parquet)]) == 0
    assert "12 rows, 3 file(s)" in capfd.readouterr().err
    import pyarrow.parquet as pq
    assert pq.read_table(parquet).column("id").to_pylist() == list(range(12))


def test_files_may_follow_options(backend, parts, tmp_path, capfd):
    # argparse took the FILEs before the first option only: "unrecognized arguments: b"
    a, b, c = parts[1]
    assert main(["count", a, "--no-crc", b]) == 0
    assert capfd.readouterr().out.splitlines() == [f"3\t{a}", f"4\t{b}", "7\ttotal"]
    assert main(["count", "--no-crc", "--", c]) == 0 and capfd.readouterr().out == f"5\t{c}\n"
    out = str(tmp_path / "ab.tfrecord")
    assert main(["merge", a, "-o", out, b]) == 0
    assert list(tfl.TFRecordReader(out)) == _examples(0, 7) and backend.name == tfl.implementation


def test_a_file_named_like_a_glob_is_itself_and_an_empty_match_is_an_error(backend, tmp_path, capfd):
    literal = _write(tmp_path / "x[1].tfrecord", [b"r"] * 2)
    assert main(["count", literal]) == 0
    assert capfd.readouterr().out == f"2\t{literal}\n"
    # exit 2, as for a missing file (it was 1, as for a damaged one)
    for arg in (str(tmp_path / "none-*.tfrecord"), str(tmp_path / "empty")):
        os.makedirs(tmp_path / "empty", exist_ok=True)
        assert main(["to-parquet", arg, "-o", str(tmp_path / "o.parquet")]) == 2
        assert "no TFRecord files found" in capfd.readouterr().err
        assert main(["count", arg]) == 2 and "no TFRecord files found" in capfd.readouterr().err
    assert main(["count", str(tmp_path / "missing.tfrecord")]) == 2
    assert not (tmp_path / "o.parquet").exists()


@pytest.fixture
def damaged(tmp_path):
    """Four Examples (id 0..3) with record 1's data damaged."""
    path = tmp_path / "damaged.tfrecord"
    _write(path, _examples(0, 4))
    data = bytearray(path.read_bytes())
    data[len(data) // 4 + 14] ^= 0xFF
    path.write_bytes(bytes(data))
    return str(path)


def test_the_python_api_keeps_its_spelling(backend, damaged):
    with pytest.raises(tfl.CorruptRecordError, match="pass on_corrupt='skip' to drop bad records"):
        list(tfl.TFRecordReader(damaged))


@pytest.mark.parametrize("argv", [["count"], ["head"], ["schema"], ["stats"], ["to-parquet", "-o", "{out}"],
                                  ["cat", "-o", "{out}"], ["merge", "-o", "{out}"],
                                  ["split", "-n", "2", "--prefix", "{out}"]])
def test_every_command_reading_records_takes_on_corrupt(backend, damaged, tmp_path, capfd, argv):
    # The CLI had no way to keep the good records, and its errors said "pass on_corrupt='skip'".
    out = str(tmp_path / "out")
    argv = [a.format(out=out) for a in argv] + [damaged]
    copies = argv[0] in ("cat", "merge", "split")  # a plain copy checks no data CRC: skip and stop imply --verify
    assert main(argv + ["--verify"] * copies) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "record 1" in err and "on_corrupt" not in err
    assert "pass --on-corrupt skip to drop bad records and keep the rest, or --on-corrupt stop" in err
    assert os.listdir(tmp_path) == ["damaged.tfrecord"]  # nothing written
    for mode, ids in (("skip", [0, 2, 3]), ("stop", [0])):
        assert main(argv + ["--on-corrupt", mode]) == 0
        std = capfd.readouterr()
        dropped = [line for line in std.err.splitlines() if " dropped " in line]
        assert dropped == [f"tfrecord-lite {argv[0]}: dropped {damaged}, record 1, byte offset 47: corrupted "
                           "record at 59: the masked CRC32C of the 31-byte data does not match"]
        if argv[0] == "count":
            assert std.out == f"{len(ids)}\t{damaged}\n"
        elif argv[0] == "head":
            assert [line for line in std.out.splitlines() if line.startswith("record")] == \
                [f"record {i}: 31 bytes" for i in ids]  # numbered in the file
        elif argv[0] == "stats":
            assert std.out.startswith(f"{len(ids)} records")
        elif argv[0] == "to-parquet":
            import pyarrow.parquet as pq
            assert pq.read_table(out).column("id").to_pylist() == ids
        elif argv[0] == "split":  # split had no --on-corrupt
            shards = [f"{out}-0000{i}-of-00002.tfrecord" for i in range(2)]
            assert std.out.splitlines() == [f"{len(ids) - len(ids) // 2}\t{shards[0]}", f"{len(ids) // 2}\t{shards[1]}"]
            assert [r for s in shards for r in tfl.TFRecordReader(s)] == [_examples(0, 4)[i] for i in ids]
        elif copies:  # a salvage: the good records, verbatim
            assert list(tfl.TFRecordReader(out)) == [r for i, r in enumerate(_examples(0, 4)) if i in ids]


def test_commands_without_on_corrupt_point_to_the_one_that_has_it(backend, damaged, tmp_path, capfd):
    assert main(["index", damaged]) == 1
    err = capfd.readouterr().err
    assert "on_corrupt" not in err and "tfrecord-lite cat FILE --on-corrupt skip -o OUT" in err
    assert main(["verify", damaged]) == 1
    std = capfd.readouterr()
    assert "on_corrupt" not in std.out + std.err and "--on-corrupt skip" in std.err
    assert "CORRUPT" in std.out and "record 1" in std.out


def test_to_parquet_reads_with_the_spec_of_spec_or_the_sample_of_sample(backend, tmp_path, capfd):
    import pyarrow.parquet as pq
    path = _write(tmp_path / "tags.tfrecord", [tfl.encode_example({"id": i, "tags": [b"t"] * (1 + i % 2)})
                                               for i in range(6)])
    out = str(tmp_path / "out.parquet")
    # Inferred from the records schema --sample N reads, so schema shows what to-parquet does.
    assert main(["to-parquet", path, "-o", out, "--sample", "1"]) == 1
    assert "feature 'tags': 2 values but the shape [] needs 1" in capfd.readouterr().err
    assert main(["to-parquet", path, "-o", out]) == 0
    assert pq.read_table(out).column("tags").to_pylist()[:2] == [[b"t"], [b"t", b"t"]]
    # --spec takes what schema --format json prints, edited.
    assert main(["schema", path, "--format", "json"]) == 0
    spec = json.loads(capfd.readouterr().out)
    spec["id"] = {"type": "VarLenFeature", "dtype": "int64"}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert main(["to-parquet", path, "-o", out, "--spec", str(tmp_path / "spec.json")]) == 0
    assert pq.read_table(out).column("id").to_pylist()[:2] == [[0], [1]]
    capfd.readouterr()
    for bad, says in (("[1]", "must map feature names"), ('{"id": {"type": "SparseFeature"}}', "feature 'id' must"),
                      ('{"id": {"type": "FixedLenFeature", "dtype": "int8"}}', "feature 'id': unsupported"),
                      ("{", "is not JSON")):
        (tmp_path / "bad.json").write_text(bad)
        assert main(["to-parquet", path, "-o", str(tmp_path / "bad.parquet"), "--spec", str(tmp_path / "bad.json")]) == 1
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and f"--spec {tmp_path / 'bad.json'}" in err and says in err, err
        assert "tfrecord-lite schema FILE --format json" in err
    assert not (tmp_path / "bad.parquet").exists()


@pytest.mark.parametrize("argv", [["merge", "-o", "{out}", "--compression", "gzip"], ["to-parquet", "-o", "{out}"],
                                  ["count"]])
def test_ctrl_c_ends_with_one_line_status_130_and_no_output(backend, tmp_path, capfd, monkeypatch, argv):
    # Ctrl-C printed a traceback (and exited 1).
    paths = [_write(tmp_path / f"p{i}.tfrecord", _examples(10 * i, 10)) for i in range(3)]
    out = str(tmp_path / "out")
    reads = []

    def interrupting(*args, **kwargs):
        reads.append(args)
        if len(reads) == 2:  # after the first input was read, and for merge written
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    real = tfl.TFRecordReader.frame_blocks if argv[0] == "merge" else tfl.TFRecordReader.record_batches
    if argv[0] == "count":
        real = tfl.TFRecordReader.record_spans
        monkeypatch.setattr(tfl.TFRecordReader, "record_spans", interrupting)
    else:
        monkeypatch.setattr(tfl.TFRecordReader, real.__name__, interrupting)
    assert main([a.format(out=out) for a in argv] + paths) == 130
    std = capfd.readouterr()
    assert std.err == f"tfrecord-lite {argv[0]}: interrupted\n"
    assert std.out == (f"10\t{paths[0]}\n" if argv[0] == "count" else "")  # count's line for each file done
    assert sorted(os.listdir(tmp_path)) == ["p0.tfrecord", "p1.tfrecord", "p2.tfrecord"]  # no part file


def test_errors_after_a_dropped_record_name_the_record_as_the_file_numbers_it(backend, tmp_path, capfd):
    # stats counted the records it had seen, so a malformed record after a dropped one was
    # named by its position among the good ones (record 2, for the file's record 3).
    records = _examples(0, 5)
    records[3] = b"\xff\xff"
    path = _write(tmp_path / "mixed.tfrecord", records)
    data = bytearray(open(path, "rb").read())
    data[len(records[0]) + 16 + 14] ^= 0xFF  # record 1's data
    open(path, "wb").write(bytes(data))
    offset = 3 * (len(records[0]) + 16)
    assert main(["stats", path, "--on-corrupt", "skip"]) == 1
    err = capfd.readouterr().err.splitlines()
    assert " dropped " in err[0] and "record 1," in err[0]
    assert err[1].startswith(f"tfrecord-lite stats: {path}, record 3, byte offset {offset}: malformed Example")


def test_verify_names_a_wrong_compression_as_the_option(backend, tmp_path, capfd):
    packed = _write(tmp_path / "f.tfrecord.gz", [b"r"], "gzip")
    assert main(["verify", packed, "--compression", "none"]) == 1
    out = capfd.readouterr().out
    assert "but --compression none was given: pass --compression gzip, or auto to detect it" in out
    assert "compression=" not in out


def test_to_parquet_refuses_to_replace_an_input(backend, tmp_path, capfd):
    # to-parquet data.tfrecord -o data.tfrecord replaced the records with their Parquet table.
    path = _write(tmp_path / "data.tfrecord", _examples(0, 3))
    before = open(path, "rb").read()
    os.symlink(path, tmp_path / "link.tfrecord")
    for out in (path, str(tmp_path / "link.tfrecord")):
        assert main(["to-parquet", path, "-o", out]) == 1
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and "OUT is one of the inputs" in err
    assert open(path, "rb").read() == before


def _feed(fifo, data):
    """Write data into a FIFO from a thread (its open waits for the reader)."""
    import threading

    def write():
        with open(fifo, "wb") as f:
            f.write(data)
    feeder = threading.Thread(target=write, daemon=True)
    feeder.start()
    return feeder


@pytest.mark.parametrize("argv", [["count", "{fifo}"], ["head", "{fifo}", "-n", "1"], ["stats", "{fifo}"],
                                  ["verify", "{fifo}"], ["cat", "{fifo}", "-o", "{out}"],
                                  ["merge", "{fifo}", "-o", "{out}", "--verify"],
                                  ["to-parquet", "{fifo}", "-o", "{out}", "--spec", "{spec}"]])
def test_a_pipe_is_read_once_as_a_stream(backend, tmp_path, capfd, argv):
    # Every command checked its input by reading its first bytes and seeking back, so
    # `zcat a.gz | tfrecord-lite count /dev/stdin` (or a FIFO, or <(...)) failed with "Illegal seek".
    records = _examples(0, 5)
    packed = open(_write(tmp_path / "src.tfrecord.gz", records, "gzip"), "rb").read()
    fifo, out, spec = str(tmp_path / "fifo"), str(tmp_path / "out"), tmp_path / "spec.json"
    spec.write_text('{"id": {"type": "FixedLenFeature", "dtype": "int64", "shape": []}}')
    os.mkfifo(fifo)
    feeder = _feed(fifo, packed)
    assert main([a.format(fifo=fifo, out=out, spec=spec) for a in argv]) == 0
    feeder.join(10)
    std = capfd.readouterr()
    if argv[0] in ("cat", "merge"):
        assert list(tfl.TFRecordReader(out)) == records
    elif argv[0] == "to-parquet":
        import pyarrow.parquet as pq
        assert pq.read_table(out).column("id").to_pylist() == list(range(5))
    else:
        # stats said a pipe held 0 bytes: it has no size, but what came through it is one.
        want = {"count": "5\t", "head": "record 0:", "stats": f"5 records, {len(packed)} bytes in 1 file(s)",
                "verify": "OK\t5 good"}
        assert want[argv[0]] in std.out


@pytest.mark.parametrize("argv", [["count", "-"], ["verify", "-"], ["head", "-n", "1", "-"], ["stats", "-"],
                                  ["schema", "-"]])
def test_a_dash_reads_standard_input(backend, tmp_path, argv):
    # "-" was a file name: "tfrecord-lite count: -: no such file", exit 2.
    import subprocess
    import sys

    packed = open(_write(tmp_path / "src.tfrecord.gz", _examples(0, 5), "gzip"), "rb").read()
    env = dict(os.environ, PYTHONPATH=ROOT, TFRECORD_LITE_PURE_PYTHON="1" if backend.name == "python" else "")
    done = subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], input=packed, capture_output=True,
                          env=env, check=True)
    want = {"count": b"5\t", "verify": b"OK\t5 good", "head": b"record 0:", "stats": b"5 records",
            "schema": b"FixedLenFeature"}
    assert want[argv[0]] in done.stdout and done.stderr == b""


def test_to_parquet_without_a_spec_and_split_refuse_a_pipe(backend, tmp_path, capfd):
    # Inferring the spec read the pipe's first records, and the conversion then found none left.
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    assert main(["to-parquet", fifo, "-o", str(tmp_path / "out.parquet")]) == 1
    assert "a pipe can be read only once" in capfd.readouterr().err and not (tmp_path / "out.parquet").exists()
    assert main(["split", fifo, "-n", "2"]) == 1
    assert "a pipe can be read only once" in capfd.readouterr().err


def test_index_refuses_a_pipe_and_merge_index_one_as_out(backend, tmp_path, capfd):
    # index opened a FIFO more than once, and hung (/dev/stdin: "corrupted record at 0");
    # merge --index -o /dev/stdout wrote /dev/stdout.index
    import contextlib
    import threading
    import time

    src = _write(tmp_path / "src.tfrecord", _examples(0, 5))
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    done = threading.Event()

    def feed():  # the file to each reader that opens the FIFO, until done
        while not done.is_set():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                time.sleep(0.01)
                continue
            with contextlib.suppress(BrokenPipeError):  # a reader that closed early
                os.write(fd, open(src, "rb").read())
            os.close(fd)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        assert main(["index", src, fifo]) == 1
    finally:
        done.set()
        feeder.join(10)
    assert "tfrecord-lite index: " + fifo + ": an index holds byte offsets" in capfd.readouterr().err
    drain = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so that a writer's open returns
    try:
        assert main(["merge", src, "-o", fifo, "--index"]) == 1
    finally:
        os.close(drain)
    assert "OUT is a pipe or a device" in capfd.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "src.tfrecord"]


@pytest.mark.parametrize("argv", [["count"], ["verify"], ["head"], ["schema"], ["stats"], ["index"],
                                  ["merge", "-o", "{out}", "--verify"], ["cat", "-o", "{out}", "--verify"],
                                  ["split", "-n", "2", "--prefix", "{out}"]])
def test_every_command_reading_records_takes_max_record_bytes(backend, tmp_path, capfd, argv):
    # The hint said "pass a larger max_record_bytes", which no command took.
    path = _write(tmp_path / "in.tfrecord", _examples(0, 3))  # 31-byte records
    argv = [a.format(out=str(tmp_path / "out")) for a in argv] + [path]
    assert main(argv + ["--max-record-bytes", "30"]) == 1
    std = capfd.readouterr()
    problem = std.out if argv[0] == "verify" else std.err  # verify lists each problem
    assert f"{path}, record 0, byte offset 0: the length field says 31 bytes, over max_record_bytes=30" in problem
    if argv[0] != "verify":
        # index, which has no --on-corrupt, said the file was damaged, and not that it takes
        # --max-record-bytes
        salvage = "--on-corrupt skip " if argv[0] != "index" else "copy the good records with: tfrecord-lite cat"
        assert "pass a larger --max-record-bytes; otherwise the file is damaged (" + salvage in std.err
        assert "max_record_bytes;" not in std.err and "on_corrupt=" not in std.err
    else:  # verify called each such record corrupt, and said only to re-create the file
        assert "pass a larger --max-record-bytes to read it" in std.err
    assert main(argv + ["--max-record-bytes", "31"]) == 0
    capfd.readouterr()


def test_a_length_over_the_default_limit_is_named_in_each_commands_words(backend, tmp_path, capfd):
    import struct

    from tfrecord_lite._native import framing

    path = tmp_path / "huge.tfrecord"
    header = struct.pack("<Q", 2**31 + 1)
    path.write_bytes(header + struct.pack("<I", framing.masked_crc32c(header)) + b"x" * 64)
    assert main(["count", str(path)]) == 1
    assert "over max_record_bytes=2147483648. If the file really holds records this large, pass a larger " \
        "--max-record-bytes; otherwise" in capfd.readouterr().err
    assert main(["count", str(path), "--max-record-bytes", str(2**32)]) == 1
    assert "truncated record at 0: it ends at byte 2147483665" in capfd.readouterr().err
    # to-parquet has no --max-record-bytes: no Example is that large
    assert main(["to-parquet", str(path), "-o", str(tmp_path / "x.parquet")]) == 1
    err = capfd.readouterr().err
    assert err.endswith("The file is damaged: pass --on-corrupt skip to drop bad records\n")
    assert "max_record_bytes;" not in err


@pytest.mark.parametrize("argv, out", [(["merge", "-o", "{dir}/m.tfrecord"], "OUT"),
                                       (["split", "-n", "2", "--prefix", "{dir}/s"], "shards")])
def test_merge_and_split_index_with_compression_is_refused_in_the_commands_words(backend, tmp_path, capfd,
                                                                                 argv, out):
    # The error was the Python API's ("index=True needs an uncompressed file, but
    # compression='gzip'... drop index=True"), naming a shard that was never written.
    src = _write(tmp_path / "src.tfrecord", _examples(0, 3))
    d = tmp_path / "out"
    args = [argv[0], src] + [a.format(dir=d) for a in argv[1:]]
    assert main(args + ["--compression", "gzip", "--index"]) == 1
    assert capfd.readouterr().err == (f"tfrecord-lite {argv[0]}: --index needs uncompressed {out}, but --compression "
                                      "gzip was given: records in a compressed stream have no byte offsets to index. "
                                      "Leave out --index or --compression\n")
    assert not d.exists()
    assert main(args + ["--compression", "none", "--index"]) == 0


@pytest.mark.parametrize("command", ["merge", "cat", "split"])
def test_merge_cat_and_split_take_a_compression_level(backend, tmp_path, capfd, command):
    records = _examples(0, 50)
    src = _write(tmp_path / "src.tfrecord", records)
    with tfl.TFRecordWriter(tmp_path / "alone", "gzip", compression_level=1) as w:
        w.write_many(records)
    out = tmp_path / "out"
    argv = [command, src] + (["-n", "1", "--prefix", str(out)] if command == "split" else ["-o", str(out)])
    assert main(argv + ["--compression", "gzip", "--compression-level", "1"]) == 0
    written = f"{out}-00000-of-00001.tfrecord" if command == "split" else out
    assert open(written, "rb").read() == (tmp_path / "alone").read_bytes()
    os.remove(written)
    # A level without a compression would be ignored: it is refused.
    assert main(argv + ["--compression-level", "1"]) == 1
    assert capfd.readouterr().err.endswith("--compression is none. Pass --compression gzip or zlib with it, "
                                           "or leave it out\n")
    assert not os.path.exists(written)
    with pytest.raises(SystemExit):
        main(argv + ["--compression", "gzip", "--compression-level", "10"])
    assert "argument --compression-level: must be 0 to 9, not 10" in capfd.readouterr().err


@pytest.mark.parametrize("ending, compression", [(".gz", "gzip"), (".GZ", "gzip"), (".zlib", "zlib"),
                                                 (".zz", "zlib")])
@pytest.mark.parametrize("command", ["merge", "cat", "split"])
def test_an_output_named_compressed_needs_compression_given(backend, tmp_path, capfd, command, ending, compression):
    # merge -o all.tfrecord.gz wrote uncompressed data under a gzip name.
    records = _examples(0, 3)
    src = _write(tmp_path / "src.tfrecord", records)
    out = tmp_path / f"out.tfrecord{ending}"
    if command == "split":
        argv = [command, src, "-n", "1", "--prefix", str(tmp_path / "out"), "--suffix", f".tfrecord{ending}"]
        written = tmp_path / f"out-00000-of-00001.tfrecord{ending}"
        said = (f"--suffix .tfrecord{ending} ends in {ending.lower()}, but no --compression was given, so the "
                f"shards would be written uncompressed. Pass --compression {compression} to compress them, or "
                "--compression none to write them uncompressed under that name\n")
    else:
        argv, written = [command, src, "-o", str(out)], out
        said = (f"{out}: the output name ends in {ending.lower()}, but no --compression was given, so OUT would "
                f"be written uncompressed. Pass --compression {compression} to compress it, or --compression "
                "none to write it uncompressed under that name\n")
    assert main(argv) == 1
    assert capfd.readouterr().err == f"tfrecord-lite {command}: {said}"
    assert os.listdir(tmp_path) == ["src.tfrecord"]
    assert main(argv + ["--compression", compression]) == 0
    assert tfl.io.detect_compression(written.read_bytes()[:12]) == compression
    assert main(argv + ["--compression", "none"]) == 0
    assert list(tfl.TFRecordReader(written, compression=None)) == records
