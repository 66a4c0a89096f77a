"""What the CLI (and merge/split underneath it) does with input that is not TFRecord, with
damaged input, and with bad arguments; head on SequenceExamples."""

import gzip
import os
import re
import subprocess
import sys
import zlib

import pytest

import tfrecord_lite as tfl
from tfrecord_lite.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = b"id,label\n1,cat\n2,dog\n" * 50

FOREIGN = {
    "text": (TEXT, "it looks like text (starting 'id,label')"),
    "parquet": (b"PAR1" + os.urandom(200) + b"PAR1", "it looks like a Parquet file"),
    "png": (b"\x89PNG\r\n\x1a\n" + os.urandom(100), "it looks like a PNG image"),
    "npy": (b"\x93NUMPY\x01\x00" + os.urandom(100), "it looks like a NumPy .npy file"),
    "gzip-text": (gzip.compress(TEXT), "its gzip-decompressed content looks like text"),
    "zlib-text": (zlib.compress(TEXT), "its zlib-decompressed content looks like text"),
    "short-text": (b"hi\n", "it looks like text (starting 'hi')"),
}


def _write(path, records, compression=None):
    with tfl.TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return str(path)


def _run(*argv):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_file_that_is_not_tfrecord_is_named_as_such_by_every_command(backend, tmp_path, capfd, kind):
    data, looks = FOREIGN[kind]
    bad = tmp_path / f"input.{kind}"
    bad.write_bytes(data)
    good = _write(tmp_path / "good.tfrecord", [b"r1", b"r2"])
    out = tmp_path / "out"
    commands = [
        ["count", str(bad)], ["verify", good, str(bad)], ["head", str(bad)], ["index", str(bad)],
        ["cat", good, str(bad), "-o", str(out / "c.tfrecord")],
        ["merge", good, str(bad), "-o", str(out / "m.tfrecord")],
        ["merge", good, str(bad), "-o", str(out / "m.tfrecord.gz"), "--compression", "gzip", "--verify"],
        ["split", str(bad), "-n", "2", "--prefix", str(out / "s")],
        ["schema", good, str(bad)], ["stats", str(bad)],
        ["to-parquet", good, str(bad), "-o", str(out / "p.parquet")],  # was "corrupted record at 0"
    ]
    for argv in commands:
        assert main(argv) == 1, argv
        captured = capfd.readouterr()
        text = captured.out + captured.err
        assert f"{bad}: not a TFRecord file: {looks}" in text, (argv, text)
        assert text.count("not a TFRecord file:") == 1, (argv, text)
        assert "on_corrupt" not in text and "corrupted record" not in text, (argv, text)
    assert not out.exists() or os.listdir(out) == []
    # Python's merge and split refuse it the same way.
    for call in (lambda: tfl.merge([good, bad], tmp_path / "py.tfrecord"), lambda: tfl.split(bad, 2)):
        with pytest.raises(tfl.NotTFRecordError, match=re.escape(f"not a TFRecord file: {looks}")) as info:
            call()
        assert info.value.path == str(bad)
        assert isinstance(info.value, tfl.DataLossError)


def test_verify_reports_good_files_and_lists_the_foreign_one(backend, tmp_path, capfd):
    good = _write(tmp_path / "good.tfrecord", [b"r1", b"r2"])
    (tmp_path / "notes.txt").write_bytes(TEXT)
    assert main(["verify", good, str(tmp_path / "notes.txt")]) == 1
    captured = capfd.readouterr()
    assert f"OK\t2 good records\t{good}" in captured.out
    assert f"not a TFRecord file\t{tmp_path / 'notes.txt'}" in captured.out
    assert "1 file(s) are not TFRecord files" in captured.err


def _damaged(tmp_path, first_header=False):
    path = tmp_path / "damaged.tfrecord"
    _write(path, [b"x" * 10, b"y" * 10, b"z" * 10, b"w" * 10])
    data = bytearray(path.read_bytes())
    data[2 if first_header else 26 + 12 + 3] ^= 0xFF  # record 0's length, or record 1's data
    path.write_bytes(bytes(data))
    return str(path)


def test_a_damaged_tfrecord_file_is_still_reported_as_damaged(backend, tmp_path, capfd):
    path = _damaged(tmp_path, first_header=True)
    assert main(["verify", path]) == 1
    out = capfd.readouterr().out
    assert "not a TFRecord" not in out
    assert "CORRUPT" in out and "record 0" in out and "3 good records" in out


def test_verify_prints_each_problem_once(backend, tmp_path):
    path = _damaged(tmp_path)
    done = _run("verify", path)
    assert done.returncode == 1
    text = done.stdout + done.stderr
    assert text.count("record 1, byte offset 26") == 1, text
    assert "1 bad\t3 good records" in done.stdout


def test_merge_and_cat_check_frames_on_the_way(backend, tmp_path, capfd):
    path = _damaged(tmp_path)
    good = _write(tmp_path / "good.tfrecord", [b"r1"])
    for command in ("merge", "cat"):
        out = tmp_path / f"{command}.tfrecord"
        # --verify checks every data CRC: the bad record stops the copy, nothing is written.
        assert main([command, good, path, "-o", str(out), "--verify"]) == 1
        err = capfd.readouterr().err
        assert f"{path}, record 1, byte offset 26" in err and "corrupted record" in err
        assert not out.exists()
    # Streaming through a decompressing or recompressing copy checks every header as well.
    cut = tmp_path / "cut.tfrecord.gz"
    cut.write_bytes(gzip.compress(open(path, "rb").read()[:-5]))
    assert main(["merge", good, str(cut), "-o", str(tmp_path / "m2.tfrecord")]) == 1
    assert "truncated" in capfd.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["head", "FILE", "-n", "-1"], "argument -n: must be at least 0, not -1"),
    (["head", "FILE", "-n", "two"], "argument -n: 'two' is not a whole number"),
    (["head", "FILE", "--width", "0"], "argument --width: must be at least 1, not 0"),
    (["split", "FILE", "-n", "0"], "argument -n/--num-shards: must be at least 1, not 0"),
    # schema printed an empty spec for these (no records sampled), as if the files held none
    (["schema", "FILE", "--sample", "0"], "argument --sample: must be at least 1, not 0"),
    (["schema", "FILE", "--sample", "-1"], "argument --sample: must be at least 1, not -1"),
    (["to-parquet", "FILE", "-o", "x", "--batch-size", "0"], "argument --batch-size: must be at least 1, not 0"),
    (["count", "FILE", "--compression", "bogus"],
     "argument --compression: invalid choice: 'bogus' (choose from 'auto', 'none', 'gzip', 'zlib')"),
    (["merge", "FILE", "-o", "x", "--input-compression", "bogus"],
     "invalid choice: 'bogus' (choose from 'auto', 'none', 'gzip', 'zlib')"),
    (["cat", "FILE", "-o", "x", "--compression", "auto"],
     "invalid choice: 'auto' (choose from 'none', 'gzip', 'zlib')"),
    (["to-parquet", "FILE", "-o", "x", "--columns", " , "],
     "argument --columns: expected comma-separated feature names, not ' , '"),
    # an empty path (an unset variable) read as ": no such file", or named shards "-00000-of-00002..."
    *[(argv, f"argument {name}: an empty path names no file (is a shell variable unset?)") for argv, name in [
        (["count", "FILE", ""], "FILE"), (["head", ""], "FILE"), (["split", "", "-n", "2"], "FILE"),
        (["split", "FILE", "-n", "2", "--prefix", ""], "--prefix"), (["merge", "FILE", "-o", ""], "-o/--output"),
        (["cat", "FILE", "-o", ""], "-o/--output"), (["to-parquet", "FILE", "-o", ""], "-o/--output"),
        (["to-parquet", "FILE", "-o", "x", "--spec", ""], "--spec"), (["index", ""], "FILE")]],
    # an option the command lacks was refused with the top parser's usage, naming no command
    (["schema", "FILE", "--progress"], "usage: tfrecord-lite schema [-h]"),
    (["schema", "FILE", "--progress"], "tfrecord-lite schema: error: unrecognized arguments: --progress"),
    (["count", "FILE", "--nope", "--", "FILE"], "tfrecord-lite count: error: unrecognized arguments: --nope"),
])
def test_bad_arguments_are_rejected_with_the_cli_spellings(tmp_path, capfd, argv, message):
    path = _write(tmp_path / "f.tfrecord", [b"r"])
    with pytest.raises(SystemExit) as info:
        main([path if a == "FILE" else a for a in argv])
    assert info.value.code == 2
    err = capfd.readouterr().err
    assert message in err, err
    assert "None, ''" not in err and "'GZIP'" not in err


def test_compression_names_are_case_insensitive(backend, tmp_path, capfd):
    path = _write(tmp_path / "f.tfrecord.gz", [b"r1", b"r2"], "gzip")
    assert main(["count", path, "--compression", "GZIP"]) == 0
    assert capfd.readouterr().out == f"2\t{path}\n"
    assert main(["cat", path, "-o", str(tmp_path / "z.tfrecord.zz"), "--compression", "ZLIB"]) == 0
    assert list(tfl.TFRecordReader(tmp_path / "z.tfrecord.zz")) == [b"r1", b"r2"]
    assert main(["head", path, "-n", "0"]) == 0
    assert capfd.readouterr().out == ""


def test_the_wrong_compression_is_named_before_anything_is_read(backend, tmp_path, capfd):
    """count plain.tfrecord --compression gzip said "corrupt gzip stream ... the compressed
    file is damaged"; with --compression none a gzip file "looks like gzip-compressed data"."""
    plain = _write(tmp_path / "f.tfrecord", [b"r1"], None)
    packed = _write(tmp_path / "f.tfrecord.gz", [b"r1"], "gzip")
    for path, given, message in ((plain, "gzip", "not a gzip-compressed TFRecord file. The file looks like an "
                                                 "uncompressed TFRecord file"),
                                 (packed, "none", "not an uncompressed TFRecord file. The file looks gzip-compressed")):
        for argv in (["count", path, "--compression", given], ["head", path, "--compression", given],
                     ["cat", path, "-o", str(tmp_path / "out.tfrecord"), "--input-compression", given],
                     ["split", path, "-n", "2", "--input-compression", given]):
            assert main(argv) != 0
            err = capfd.readouterr().err
            assert message in err
            # In the command's words: the hint said "compression=None was given: pass compression='gzip'".
            option = argv[-2]
            right = "none" if given == "gzip" else "gzip"
            assert f"but {option} {given} was given: pass {option} {right}, or auto to detect it" in err, err
    assert not [p for p in os.listdir(tmp_path) if not p.startswith("f.")]


def test_head_shows_a_sequence_examples_context_and_feature_lists(backend, tmp_path, capfd):
    path = _write(tmp_path / "seq.tfrecord", [
        tfl.encode_sequence_example({"id": 7, "name": b"clip"},
                                    {"tokens": [[1, 2], [3]], "score": [[0.5], [1.5], [2.5], [3.5]]}),
        tfl.encode_example({"label": 3}),
    ])
    assert main(["head", path]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[0].startswith("record 0: ") and lines[1:7] == [
        "  context:",
        "    id: int64[1] [7]",
        "    name: bytes[1] [b'clip']",
        "  feature lists:",
        "    score: 4 steps [float32[1] [0.5]; float32[1] [1.5]; float32[1] [2.5]; ... (4 steps)]",
        "    tokens: 2 steps [int64[2] [1, 2]; int64[1] [3]]",
    ]
    assert lines[7].startswith("record 1: ") and lines[8:] == ["  label: int64[1] [3]"]


def test_a_plain_copy_checks_each_inputs_first_record_header(backend, tmp_path, capfd):
    """merge and cat without --verify copy uncompressed inputs as bytes, but not before the
    first record header (length and its CRC) of each has been checked."""
    good = _write(tmp_path / "good.tfrecord", [b"a", b"b"])
    damaged = bytearray(open(good, "rb").read())
    damaged[9] ^= 1  # the first length CRC
    inputs = {"badcrc": (bytes(damaged), tfl.CorruptRecordError, "masked CRC32C of the length field"),
              "binary": (bytes(range(256)) * 4, tfl.CorruptRecordError, "masked CRC32C of the length field"),
              "short": (b"\x01\x00\x00", tfl.TruncatedRecordError, "ends inside the first record's header")}
    out = tmp_path / "out"
    for name, (data, error, says) in inputs.items():
        bad = tmp_path / f"{name}.tfrecord"
        bad.write_bytes(data)
        for argv in (["merge", str(bad), good, "-o", str(out / "m.tfrecord")],
                     ["cat", good, str(bad), "-o", str(out / "c.tfrecord")]):
            assert main(argv) == 1, argv
            err = capfd.readouterr().err
            assert f"{bad}, record 0, byte offset 0: " in err and says in err, err
        with pytest.raises(error, match=says) as info:
            tfl.merge([good, bad], tmp_path / "py.tfrecord")
        assert (info.value.path, info.value.offset, info.value.index) == (str(bad), 0, 0)
        assert isinstance(info.value, tfl.DataLossError)
    assert not out.exists() or os.listdir(out) == []
    assert not (tmp_path / "py.tfrecord").exists()
    # An empty file is an empty TFRecord file.
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    assert main(["merge", str(tmp_path / "empty.tfrecord"), good, "-o", str(out / "m.tfrecord")]) == 0
    assert list(tfl.TFRecordReader(out / "m.tfrecord")) == [b"a", b"b"]
    help_text = " ".join(_run("merge", "--help").stdout.split())
    assert "--no-header-check skips that read, checking only each input's first record header" in help_text


@pytest.mark.parametrize("buffered", [True, False])
def test_output_into_a_closed_pipe_or_a_full_disk(backend, tmp_path, buffered):
    # A pipe closed before the final flush printed "Exception ignored ... BrokenPipeError"
    # and exited 120; one closed during verify exited 0, hiding the damage it had found.
    good = _write(tmp_path / "good.tfrecord", [b"record %d" % i for i in range(3000)])
    data = bytearray(open(good, "rb").read())
    data[20] ^= 1
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    env = dict(os.environ, PYTHONPATH=ROOT, TFRECORD_LITE_PURE_PYTHON="1" if backend.name == "python" else "")
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"

    def run(argv, stdout):
        return subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)

    for argv, codes in ((["count", good], {141}), (["head", "-n", "1000", good], {141}),
                        (["verify", str(bad)], {1, 141}), (["--help"], {0})):
        read, write = os.pipe()
        os.close(read)
        try:
            done = run(argv, write)
        finally:
            os.close(write)
        assert done.returncode in codes, (argv, done.returncode, done.stderr)
        assert "Exception ignored" not in done.stderr and "Broken pipe" not in done.stderr
    with open("/dev/full", "w") as full:
        done = run(["count", good], full)
    assert done.returncode == 1 and done.stderr.count("No space left on device") == 1, done.stderr


@pytest.mark.parametrize("cut", [1, 5, 13, 20])
def test_merge_and_cat_refuse_an_input_cut_inside_a_record(backend, tmp_path, capfd, cut):
    """A plain copy checked only each input's first header: an input cut short in its middle
    or at its end gave a corrupt output, exit status 0."""
    good = _write(tmp_path / "good.tfrecord", [b"a", b"b"])
    data = open(_write(tmp_path / "full.tfrecord", [b"x" * 20] * 3), "rb").read()
    cut_file = tmp_path / "cut.tfrecord"
    cut_file.write_bytes(data[:2 * 36 + cut])  # two whole records, then part of the third
    out = tmp_path / "out"
    for argv in (["merge", good, str(cut_file), "-o", str(out / "m.tfrecord")],
                 ["cat", str(cut_file), good, "-o", str(out / "c.tfrecord")]):
        assert main(argv) == 1, argv
        err = capfd.readouterr().err
        assert f"{cut_file}, record 2, byte offset 72: truncated record at 72" in err, err
    assert not out.exists() or os.listdir(out) == []
    # Opting out copies the bytes as they are, after the first header.
    assert main(["merge", good, str(cut_file), "-o", str(out / "m.tfrecord"), "--no-header-check"]) == 0
    assert (out / "m.tfrecord").read_bytes() == open(good, "rb").read() + cut_file.read_bytes()
    assert capfd.readouterr().err == f"2 files -> {out / 'm.tfrecord'}\n"
    assert main(["merge", good, str(tmp_path / "full.tfrecord"), "-o", str(out / "m.tfrecord")]) == 0
    assert capfd.readouterr().err == f"5 records, 2 files -> {out / 'm.tfrecord'}\n"


def test_merge_reports_one_file_and_one_record_in_the_singular(backend, tmp_path, capfd):
    src = _write(tmp_path / "one.tfrecord", [b"r"])
    assert main(["merge", src, "-o", str(tmp_path / "m.tfrecord")]) == 0
    assert capfd.readouterr().err == f"1 record, 1 file -> {tmp_path / 'm.tfrecord'}\n"
