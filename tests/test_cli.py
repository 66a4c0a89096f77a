"""The tfrecord-lite command: demo, count, verify, head, merge, split, index, cat (and
progress on count/verify), through main(argv) in-process and through a real subprocess."""

import os
import re
import subprocess
import sys
import zlib

import pytest

from tfrecord_lite import TFRecordReader, TFRecordWriter
from tfrecord_lite.cli import main
from tfrecord_lite.index import build_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, records, compression=None):
    with TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return str(path)


def _run(*argv, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], capture_output=True,
                          env=env, **kw)


def test_demo_as_a_program():
    out = _run("demo", "--records", "400", text=True, check=True)
    assert "all 400 records verified" in out.stdout
    assert "records/s" in out.stdout and "MB/s" in out.stdout


def test_demo_in_process(backend, capfd):
    assert main(["demo", "--records", "200", "--shards", "2"]) == 0
    out = capfd.readouterr().out
    assert f"({backend.name} core" in out and "all 200 records verified" in out


def test_count(backend, tmp_path, capfd):
    a = _write(tmp_path / "a.tfrecord", [b"x"] * 3)
    b = _write(tmp_path / "b.tfrecord.gz", [b"y"] * 5, "gzip")
    assert main(["count", a, b]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines == [f"3\t{a}", f"5\t{b}", "8\ttotal"]


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_count_prints_each_file_as_it_is_done(backend, tmp_path, capfd, progress):
    # The lines came at the end: a damaged second file lost the first file's count.
    a = _write(tmp_path / "a.tfrecord", [b"x"] * 3)
    bad = _write(tmp_path / "bad.tfrecord", [b"y"] * 5)
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) - 3)
    c = _write(tmp_path / "c.tfrecord", [b"z"])
    assert main(["count", a, bad, c, progress]) == 1
    out, err = capfd.readouterr()
    assert out == f"3\t{a}\n" and f"tfrecord-lite count: {bad}, record 4" in err
    assert main(["count", a, bad, c, progress, "--on-corrupt", "skip"]) == 0
    assert capfd.readouterr().out.splitlines() == [f"3\t{a}", f"4\t{bad}", f"1\t{c}", "8\ttotal"]


def test_verify_reports_each_bad_record(backend, tmp_path, capfd):
    good = _write(tmp_path / "good.tfrecord", [b"a" * 10] * 4)
    data = bytearray(open(good, "rb").read())
    data[26 + 12] ^= 1   # record 1's data
    data[78 + 12] ^= 1   # record 3's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    assert main(["verify", good]) == 0
    capfd.readouterr()
    assert main(["verify", good, str(bad)]) == 1
    out = capfd.readouterr().out
    corrupt = [line for line in out.splitlines() if line.startswith("CORRUPT")]
    assert len(corrupt) == 2
    assert "record 1" in corrupt[0] and "byte offset 26" in corrupt[0] and str(bad) in corrupt[0]
    assert "record 3" in corrupt[1] and "byte offset 78" in corrupt[1]
    assert f"2 bad\t2 good records\t{bad}" in out


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_verify_counts_the_good_records_before_a_damaged_compressed_stream(backend, tmp_path, capfd, compression):
    path = _write(tmp_path / "t.tfrecord.z", [b"x" * 50] * 100, compression)
    data = open(path, "rb").read()[:-20]
    open(path, "wb").write(data)
    inflate = zlib.decompressobj(zlib.MAX_WBITS | (16 if compression == "gzip" else 0))
    k = len(inflate.decompress(data)) // 66  # records (66-byte frames) that decompress whole; 0 were counted
    assert 0 < k < 100
    assert main(["verify", path]) == 1
    out = capfd.readouterr().out
    assert f"CORRUPT {path}, record {k}, byte offset {66 * k}: the {compression} stream ends before its end" in out
    assert f"1 bad\t{k} good records\t{path}" in out


def test_head_shows_sizes_and_preview(backend, tmp_path, capfd):
    path = _write(tmp_path / "h.tfrecord", [b"\x01\x02\x03", b"", b"z" * 100])
    assert main(["head", path, "-n", "2"]) == 0
    out = capfd.readouterr().out
    assert "record 0: 3 bytes" in out and "01 02 03" in out
    assert "record 1: 0 bytes" in out and "record 2" not in out


def test_head_takes_several_files_and_numbers_records_in_each(backend, tmp_path, capfd):
    # head took one FILE; a glob or a second file was an argument error.
    a = _write(tmp_path / "a.tfrecord", [b"a0", b"a1", b"a2"])
    b = _write(tmp_path / "b.tfrecord.gz", [b"b0"], "gzip")
    c = _write(tmp_path / "c.tfrecord", [])
    assert main(["head", str(tmp_path / "*.tfrecord*"), "-n", "2"]) == 0
    shown = [line for line in capfd.readouterr().out.splitlines() if "record" in line]
    assert shown == [f"{a}, record 0: 2 bytes", f"{a}, record 1: 2 bytes", f"{b}, record 0: 2 bytes"]
    assert main(["head", b, a, "-n", "1"]) == 0
    assert capfd.readouterr().out.splitlines() == [f"{b}, record 0: 2 bytes", "  62 30",
                                                   f"{a}, record 0: 2 bytes", "  61 30"]
    assert main(["head", a, c, "-n", "0"]) == 0 and capfd.readouterr().out == ""
    with open(a, "r+b") as f:  # damage a's record 1: records keep their numbers in the file
        f.seek(18 + 12)
        f.write(b"X")
    assert main(["head", a, b, "--on-corrupt", "skip"]) == 0
    assert [line for line in capfd.readouterr().out.splitlines() if "record" in line] == [
        f"{a}, record 0: 2 bytes", f"{a}, record 2: 2 bytes", f"{b}, record 0: 2 bytes"]


def test_head_decodes_examples(backend, tmp_path, capfd):
    from tfrecord_lite import encode_example

    path = _write(tmp_path / "e.tfrecord", [encode_example({"label": 3, "score": [0.5, 1.5], "id": b"x7",
                                                           "p": [0.1, float("nan"), -1e30]})])
    assert main(["head", path]) == 0
    out = capfd.readouterr().out
    assert "label: int64[1] [3]" in out and "score: float32[2] [0.5, 1.5]" in out
    # float32 values were shown widened to float64: 0.10000000149011612
    assert "p: float32[3] [0.1, nan, -1e+30]" in out
    assert "id: bytes[1] [b'x7']" in out


def test_help_texts_read_as_written(capsys):
    # schema's and to-parquet's descriptions kept their docstring's indent, demo offered
    # --storage-option for paths it has none of, and split's options spoke of inputs.
    from tfrecord_lite.cli import _build_parser

    commands = _build_parser()._subparsers._group_actions[0].choices
    for name, parser in commands.items():
        text = parser.format_help()
        description = text.split("\n\n")[1]
        assert not any(line.startswith(" ") for line in description.splitlines()), (name, description)
        assert ("--storage-option" in text) == (name != "demo")
    split = " ".join(commands["split"].format_help().split())
    assert "the inputs" not in split and "each input" not in split and "compression of FILE" in split
    assert "(default 32)" in commands["head"].format_help()


def test_errors_are_one_line_with_advice(backend, tmp_path, capfd):
    path = tmp_path / "trunc.tfrecord"
    path.write_bytes(open(_write(tmp_path / "x", [b"abc" * 10]), "rb").read()[:-3])
    assert main(["count", str(path)]) == 1
    err = capfd.readouterr().err
    assert "truncated record at 0" in err and "--on-corrupt skip" in err and "on_corrupt" not in err
    assert main(["count", str(tmp_path / "missing")]) == 2
    assert "no such file" in capfd.readouterr().err


def test_help_for_every_command():
    for command in ("demo", "count", "verify", "head"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0


def test_merge_split_index(backend, tmp_path, capfd):
    a = _write(tmp_path / "a.tfrecord", [b"a1", b"a2"])
    b = _write(tmp_path / "b.tfrecord.gz", [b"b1", b"b2", b"b3"], "gzip")
    out = str(tmp_path / "m.tfrecord")
    assert main(["merge", a, b, "-o", out, "--verify", "--index"]) == 0
    assert "5 records, 2 files" in capfd.readouterr().err
    assert list(TFRecordReader(out)) == [b"a1", b"a2", b"b1", b"b2", b"b3"]
    assert open(out + ".index").read() == open(build_index(out, out + ".chk")).read()

    assert main(["split", out, "-n", "2", "--prefix", str(tmp_path / "s"), "--compression", "gzip"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines == [f"3\t{tmp_path}/s-00000-of-00002.tfrecord", f"2\t{tmp_path}/s-00001-of-00002.tfrecord"]
    assert list(TFRecordReader(tmp_path / "s-00001-of-00002.tfrecord")) == [b"b2", b"b3"]

    os.unlink(out + ".index")
    assert main(["index", out]) == 0
    assert capfd.readouterr().out == f"5\t{out}.index\n"
    assert open(out + ".index").read() == open(out + ".chk").read()


def test_index_names_each_sidecar_as_it_is_written(backend, tmp_path, capfd):
    # Sidecars were listed only once every file was indexed: when a later file failed, the
    # ones written before it were not named at all.
    good = _write(tmp_path / "a.tfrecord", [b"1", b"22"])
    gz = _write(tmp_path / "b.tfrecord.gz", [b"1"], "gzip")
    assert main(["index", good, gz]) == 1
    std = capfd.readouterr()
    assert std.out == f"2\t{good}.index\n" and "cannot be indexed" in std.err


def test_cat_decompresses_and_recompresses(backend, tmp_path):
    raw = _write(tmp_path / "r.tfrecord", [b"x" * 10, b"y"])
    gz = _write(tmp_path / "r.tfrecord.gz", [b"x" * 10, b"y"], "gzip")
    assert main(["cat", gz, "-o", str(tmp_path / "plain")]) == 0
    assert (tmp_path / "plain").read_bytes() == open(raw, "rb").read()
    assert main(["cat", raw, "--compression", "gzip", "-o", str(tmp_path / "again.gz")]) == 0
    assert (tmp_path / "again.gz").read_bytes() == open(gz, "rb").read()


def test_cat_to_stdout_subprocess(tmp_path):
    raw = _write(tmp_path / "r.tfrecord", [b"1", b"22"])
    gz = _write(tmp_path / "g.tfrecord.gz", [b"333"], "gzip")
    proc = _run("cat", raw, gz)
    assert proc.returncode == 0, proc.stderr
    assert list(TFRecordReader(proc.stdout)) == [b"1", b"22", b"333"]
    assert proc.stderr == b""  # no progress bar when stderr is not a terminal


def test_errors_are_one_line_and_nonzero(backend, tmp_path, capfd):
    gz = _write(tmp_path / "g.tfrecord.gz", [b"1"], "gzip")
    assert main(["index", gz]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "cannot be indexed" in err and "cat" in err
    assert main(["merge", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capfd.readouterr().err
    bad = tmp_path / "bad.tfrecord"
    _write(bad, [b"z" * 40] * 3)
    data = bytearray(bad.read_bytes())
    data[70] ^= 1
    bad.write_bytes(bytes(data))
    assert main(["merge", str(bad), "-o", str(tmp_path / "o"), "--verify"]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "record 1" in err and str(bad) in err
    assert not (tmp_path / "o").exists()


def test_help_texts_have_examples():
    for cmd in ("merge", "split", "index", "cat"):
        proc = _run(cmd, "--help")
        assert proc.returncode == 0
        assert b"examples:" in proc.stdout and b"tfrecord-lite " + cmd.encode() in proc.stdout


def test_subprocess_split_and_merge_round_trip(tmp_path):
    src = _write(tmp_path / "d.tfrecord", [b"%d" % i for i in range(20)])
    assert _run("split", src, "-n", "3").returncode == 0
    shards = sorted(str(p) for p in tmp_path.glob("d-*-of-00003.tfrecord"))
    assert len(shards) == 3
    assert _run("merge", *shards, "-o", str(tmp_path / "back.tfrecord")).returncode == 0
    assert (tmp_path / "back.tfrecord").read_bytes() == open(src, "rb").read()
    proc = _run("count", *shards)
    assert proc.stdout.decode().splitlines()[-1] == "20\ttotal"


def test_cat_appending_to_its_own_input_is_refused(tmp_path):
    """`cat a >> a` exits 1 naming the file, as GNU cat does, instead of copying what it
    appends until the disk is full (the file size limit stops such a run here)."""
    import resource

    path = _write(tmp_path / "a.tfrecord", [b"x"] * 5)
    before = open(path, "rb").read()

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))

    for extra in ([], ["--verify"]):
        with open(path, "ab") as out:
            proc = subprocess.run([sys.executable, "-m", "tfrecord_lite", "cat", path, *extra], stdout=out,
                                  stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT),
                                  preexec_fn=limit, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert f"{path}: input file is output file" in proc.stderr.decode()
        assert open(path, "rb").read() == before


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_failed_write_names_the_output(tmp_path, pure):
    """merge, split and cat report an OS error while writing (the file size limit here, a full
    disk alike) with the output's name, and leave nothing under it."""
    import resource
    import signal

    src = _write(tmp_path / "big.tfrecord", [os.urandom(100_000) for _ in range(30)])  # gzip keeps its size

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    out = tmp_path / "out"
    for argv, named in ((["merge", src, "-o", str(out / "m.tfrecord")], out / "m.tfrecord"),
                        (["merge", src, "-o", str(out / "m.tfrecord"), "--verify"], out / "m.tfrecord"),
                        (["cat", src, "-o", str(out / "c.tfrecord.gz"), "--compression", "gzip"],
                         out / "c.tfrecord.gz"),
                        (["split", src, "-n", "1", "--prefix", str(out / "s")], out / "s-00000-of-00001.tfrecord")):
        proc = subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=ROOT, TFRECORD_LITE_PURE_PYTHON=pure),
                              preexec_fn=limit, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert f"tfrecord-lite {argv[0]}: {named}: File too large" in proc.stderr, proc.stderr
        assert os.listdir(out) == []


def test_schema_names_the_file_and_record_of_a_bad_record(backend, tmp_path, capfd):
    """A record that is no Example is named by its file and its index there, as stats names
    it, not by its position among all the files' samples."""
    from tfrecord_lite import encode_example

    ex = _write(tmp_path / "ex.rec", [encode_example({"x": i}) for i in range(5)])
    mixed = _write(tmp_path / "mixed.rec", [encode_example({"x": i}) for i in range(5)] + [b"\xff\xff\xff"])
    for command in ("schema", "stats"):
        assert main([command, ex, mixed]) == 1
        err = capfd.readouterr().err
        assert err.startswith(f"tfrecord-lite {command}: {mixed}, record 5"), err
    assert main(["schema", ex, mixed, "--sample", "5"]) == 0  # the bad record is past the sample
    assert "FixedLenFeature" in capfd.readouterr().out


@pytest.mark.parametrize("progress", ["--no-progress", "--progress"])
def test_verify_reports_each_file_as_it_is_done(backend, tmp_path, capfd, monkeypatch, progress):
    # The reports came once every file was read: Ctrl-C (or a read error) in the last file
    # hid the damage found in the first, and a long run showed nothing until its end.
    from tfrecord_lite import cli

    good = _write(tmp_path / "good.tfrecord", [b"a" * 10] * 4)
    data = bytearray(open(good, "rb").read())
    data[26 + 12] ^= 1
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    last = _write(tmp_path / "last.tfrecord", [b"b"])
    opened = cli._open

    def interrupted(path, *a, **kw):
        if path == last:
            raise KeyboardInterrupt
        return opened(path, *a, **kw)

    monkeypatch.setattr(cli, "_open", interrupted)
    assert main(["verify", str(bad), good, last, progress]) == 130
    out, err = capfd.readouterr()
    assert out.splitlines()[-2:] == [f"1 bad\t3 good records\t{bad}", f"OK\t4 good records\t{good}"]
    assert out.startswith(f"CORRUPT {bad}, record 1, byte offset 26") and "interrupted" in err


def test_cat_into_a_redirected_file_removes_its_old_sidecar(tmp_path):
    # `cat a > b` left b.index (b's old records' offsets) beside the new b.
    src = _write(tmp_path / "a.tfrecord", [b"new %d" % i for i in range(5)])
    old = _write(tmp_path / "b.tfrecord", [b"old record %d" % i for i in range(5)])
    build_index(old)
    with open(old, "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "tfrecord_lite", "cat", src], stdout=out,
                              stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    assert not os.path.exists(old + ".index")
    assert open(old, "rb").read() == open(src, "rb").read()


@pytest.mark.parametrize("link", [False, True])
def test_merge_into_a_file_object_removes_its_old_sidecar(backend, tmp_path, link):
    from tfrecord_lite import TFRecordFile, merge

    src = _write(tmp_path / "a.tfrecord", [b"new"])
    old = _write(tmp_path / "b.tfrecord", [b"old"])  # same size: the stale sidecar looked right
    build_index(old)
    target = old
    if link:  # written through a symlink: the sidecars of both names described the old data
        target = str(tmp_path / "link.tfrecord")
        os.symlink(old, target)
        build_index(old, target + ".index")
    with open(target, "wb") as out:
        merge([src], out)
    assert not os.path.exists(old + ".index") and not os.path.exists(target + ".index")
    assert TFRecordFile(target)[0] == b"new"
    with open(tmp_path / "c", "wb") as out:  # a file without a sidecar: nothing to remove
        merge([src], out)
    with open(os.devnull, "wb") as out:
        merge([src], out)


def test_cat_refusing_to_append_to_its_input_keeps_the_inputs_sidecar(tmp_path):
    # The writer opened on stdout removed a.index before the refusal, though nothing was written.
    path = _write(tmp_path / "a.tfrecord", [b"x"] * 5)
    build_index(path)
    sidecar = open(path + ".index", "rb").read()
    with open(path, "ab") as out:
        proc = subprocess.run([sys.executable, "-m", "tfrecord_lite", "cat", path], stdout=out,
                              stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 1 and b"input file is output file" in proc.stderr
    assert open(path + ".index", "rb").read() == sidecar


def test_cat_into_a_redirected_file_named_gz_needs_compression_given(tmp_path):
    # `cat a > b.tfrecord.gz` wrote uncompressed data under a gzip name.
    src = _write(tmp_path / "a.tfrecord", [b"1", b"22"])
    out = tmp_path / "b.tfrecord.gz"
    errors = []
    for extra in ([], ["--compression", "gzip"]):
        with open(out, "wb") as f:
            proc = subprocess.run([sys.executable, "-m", "tfrecord_lite", "cat", src, *extra], stdout=f,
                                  stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT))
        errors.append((proc.returncode, proc.stderr.decode()))
    assert errors[0][0] == 1 and f"{out}: the output name ends in .gz, but no --compression was given" in errors[0][1]
    assert errors[1] == (0, "")
    assert out.read_bytes()[:2] == b"\x1f\x8b" and list(TFRecordReader(out)) == [b"1", b"22"]


def test_output_dash_is_standard_output(tmp_path, capfd):
    # -o - wrote a file named "-", though "-" as FILE is standard input.
    a = _write(tmp_path / "a.tfrecord", [b"1", b"22"])
    gz = _write(tmp_path / "g.tfrecord.gz", [b"333"], "gzip")
    for argv in (["cat", a, gz, "-o", "-"], ["merge", a, gz, "-o", "-"]):
        proc = _run(*argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert list(TFRecordReader(proc.stdout)) == [b"1", b"22", b"333"]
    assert not (tmp_path / "-").exists()
    assert main(["merge", a, "-o", "-", "--index"]) == 1
    assert "--index writes OUT.index beside OUT, but OUT is standard output" in capfd.readouterr().err
    assert main(["cat", a, "-o", str(tmp_path / "-")]) == 0  # a path ending in - names a file
    assert list(TFRecordReader(tmp_path / "-")) == [b"1", b"22"]


def test_cat_and_merge_bars_are_named_for_their_command_and_a_pipe_has_no_total(backend, tmp_path, capfd):
    # cat's bar said "merge", and a pipe among merge's inputs (size 0) took the bar past 100%.
    import threading

    from tfrecord_lite import merge

    src = _write(tmp_path / "a.tfrecord", [os.urandom(1000) for _ in range(300)])
    for command in ("cat", "merge"):
        assert main([command, src, "-o", str(tmp_path / f"{command}.tfrecord"), "--progress"]) == 0
        err = capfd.readouterr().err
        assert re.search(rf"{command}: +\d+%\|", err) and (command == "merge" or "merge" not in err), err
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: open(fifo, "wb").write(open(src, "rb").read()), daemon=True)
    feeder.start()
    assert merge([fifo, src], tmp_path / "m.tfrecord", progress=True).records == 600
    feeder.join(10)
    err = capfd.readouterr().err
    assert "merge: " in err and "%|" not in err  # no total: the bar counts the bytes read
