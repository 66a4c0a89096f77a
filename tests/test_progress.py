"""Progress bars: on for a terminal or progress=True, silent otherwise; progress=False wins."""

import sys

import pytest

from tfrecord_lite import TFRecordWriter, encode_example, infer_schema, merge, split, write_parallel
from tfrecord_lite.cli import main
from tfrecord_lite.progress import is_enabled, progress


@pytest.fixture
def tty(monkeypatch):
    """Make stderr claim to be a terminal."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)


def test_decision(monkeypatch):
    assert is_enabled(True) and not is_enabled(False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not is_enabled(None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert is_enabled(None) and not is_enabled(False)
    with progress(3, enabled=False) as bar:
        bar.update(3)


def _operations(tmp_path):
    with TFRecordWriter(tmp_path / "in.tfrecord") as w:
        w.write_many([b"r"] * 300)
    src = tmp_path / "in.tfrecord"
    with TFRecordWriter(tmp_path / "ex.tfrecord") as w:
        w.write_many([encode_example({"label": i}) for i in range(300)])
    flag = {True: ["--progress"], False: ["--no-progress"]}.get
    return {
        "write_parallel": lambda p: write_parallel(range(300), b"%d".__mod__, tmp_path / "wp", 2,
                                                   num_workers=1, progress=p),
        "merge": lambda p: merge([src, src], tmp_path / "m.tfrecord.gz", compression="gzip", progress=p),
        "split": lambda p: split(src, 2, tmp_path / "s", progress=p),
        "count": lambda p: main(["count", str(src)] + ({True: ["--progress"], False: ["--no-progress"]}.get(p, []))),
        "verify": lambda p: main(["verify", str(src)] + ({True: ["--progress"], False: ["--no-progress"]}.get(p, []))),
        "index": lambda p: main(["index", str(src)] + flag(p, [])),
        "head": lambda p: main(["head", str(src), "-n", "300"] + flag(p, [])),
        "infer_schema": lambda p: infer_schema(tmp_path / "ex.tfrecord", progress=p),
    }


@pytest.mark.parametrize("op", ["write_parallel", "merge", "split", "count", "verify", "index", "head",
                                "infer_schema"])
def test_progress_on_off(backend, tmp_path, capfd, op, monkeypatch):
    run = _operations(tmp_path)[op]
    run(None)
    assert capfd.readouterr().err == ""  # stderr is captured, not a terminal: silent
    run(True)
    assert "%|" in capfd.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    run(False)
    assert capfd.readouterr().err == ""
    run(None)
    assert "%|" in capfd.readouterr().err


def test_a_pipe_s_bar_counts_the_bytes_read(backend, tmp_path, capfd):
    # A pipe's size is 0 and its position unknown: the bar stood at 0 B of 0 B. It counts
    # the bytes that came through (no total: none is known).
    import os
    import threading

    src = tmp_path / "src.tfrecord"
    with TFRecordWriter(str(src)) as w:
        w.write_many(os.urandom(1000) for _ in range(3000))  # ~3 MB
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: open(fifo, "wb").write(src.read_bytes()), daemon=True)
    feeder.start()
    assert main(["count", fifo, "--progress"]) == 0
    feeder.join(10)
    err = capfd.readouterr().err
    assert "%|" not in err and "2.91MB" in err  # 3,048,000 bytes in units of 1024
