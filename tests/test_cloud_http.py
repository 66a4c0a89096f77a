"""HTTP(S) URLs read through fsspec's http filesystem, against a loopback server: URLs with a
query string (presigned URLs) get no sidecar of their own, and a read-only store still counts."""

import functools
import gzip
import http.server
import io
import os
import threading

import aiohttp  # noqa: F401 (fsspec's http filesystem: the test extras install it, never skipped)
import pytest

import tfrecord_lite as tfl
from tfrecord_lite.errors import InvalidArgumentError, TFRecordError
from tfrecord_lite.files import resolve_files
from tfrecord_lite.index import count_records


def framed(records):
    buf = bytearray()
    for r in records:
        tfl._native.framing.append_frame(buf, r)
    return bytes(buf)


class _Files(http.server.SimpleHTTPRequestHandler):
    """A static file server that ignores query strings (as most do: tokens, cache busters)
    and answers byte ranges, logging each request's target."""

    def send_head(self):
        self.server.requests.append(self.path)
        if self.server.refuse:
            self.send_error(403)
            return None
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            return super().send_head()  # its listing page (or a redirect to its name with "/")
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        with open(path, "rb") as f:
            data = f.read()
        start, end = 0, len(data)
        ranged = self.headers.get("Range", "").removeprefix("bytes=") if self.server.ranges else ""
        if ranged:
            first, _, last = ranged.partition("-")
            start, end = int(first), min(len(data), int(last) + 1 if last else len(data))
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if self.server.lengths:
            self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return io.BytesIO(data[start:end])

    def log_message(self, *args):
        pass


@pytest.fixture
def http_dir(tmp_path):
    """(directory, base URL, server) of a loopback HTTP server of tmp_path; server.requests
    lists the requests' targets, server.lengths = False leaves out Content-Length,
    server.ranges = False ignores Range headers (answering 200 with the whole file), and
    server.refuse = True answers 403 to everything."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(tmp_path)))
    server.requests, server.lengths, server.refuse, server.ranges = [], True, False, True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()


def test_a_url_with_a_query_is_scanned_and_its_index_only_read_when_given(http_dir):
    """A presigned URL (``a.tfrecord?X-Amz-Signature=...``) has no sidecar: ``...=abc.index``
    would be another object its signature does not cover (here: the data file itself, which
    was read as a broken index). It is scanned; an index file passed explicitly is read."""
    directory, base, server = http_dir
    requests = server.requests
    records = [b"a", b"bb", b"ccc"]
    (directory / "a.tfrecord").write_bytes(framed(records))
    url = f"{base}/a.tfrecord?X-Amz-Signature=abc"
    f = tfl.TFRecordFile(url)
    assert len(f) == 3 and f[1] == b"bb" and f[::-1] == records[::-1]
    assert count_records(url) == 3
    assert tfl.IndexedDataset(url)[[2, 0]] == [b"ccc", b"a"]
    assert list(tfl.TFRecordDataset(url)) == records
    assert not [r for r in requests if ".index" in r]
    with pytest.raises(InvalidArgumentError, match="query string") as info:
        tfl.build_index(url)
    assert "Pass index_file" in str(info.value)

    tfl.build_index(str(directory / "a.tfrecord"), str(directory / "a.idx"))
    (directory / "a.tfrecord").write_bytes(framed(records))
    given = tfl.TFRecordFile(url, f"{base}/a.idx?X-Amz-Signature=def")
    assert given[2] == b"ccc" and [r for r in requests if ".idx" in r]


def test_a_url_with_a_fragment_has_no_sidecar(http_dir):
    """A fragment is never sent to the server: ``a.tfrecord#part.index`` fetched a.tfrecord
    itself, read as a broken index, so counting and random access failed."""
    directory, base, server = http_dir
    (directory / "a.tfrecord").write_bytes(framed([b"a", b"bb"]))
    url = f"{base}/a.tfrecord#part"
    assert count_records(url) == 2 and tfl.TFRecordFile(url)[1] == b"bb"
    assert not [r for r in server.requests if ".index" in r]


def test_a_directory_url_lists_its_files(http_dir):
    """http://h/d/ names a directory: its listing page's files are read (that page was taken
    for the one file, "not a TFRecord file: it looks like text"), leaving out sidecars,
    subdirectories and the sort links of the page itself."""
    directory, base, _ = http_dir
    for name in ("d/a.tfrecord", "d/b.tfrecord", "d/sub/c.tfrecord"):
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(framed([name.encode()]))
    tfl.build_index(str(directory / "d" / "a.tfrecord"))
    links = ["?C=N;O=D", "?C=M;O=A", "../", "a.tfrecord", "a.tfrecord.index", "b.tfrecord", "sub/"]
    (directory / "d" / "index.html").write_text("".join(f'<a href="{link}">{link}</a>\n' for link in links))  # Apache's
    assert resolve_files(f"{base}/d/") == [f"{base}/d/a.tfrecord", f"{base}/d/b.tfrecord"]
    assert list(tfl.TFRecordDataset(f"{base}/d/")) == [b"d/a.tfrecord", b"d/b.tfrecord"]
    assert resolve_files(f"{base}/d/**") == [f"{base}/d/a.tfrecord", f"{base}/d/b.tfrecord",
                                             f"{base}/d/sub/c.tfrecord"]


def test_random_access_on_a_server_that_ignores_range(http_dir):
    """A server that ignores Range (python -m http.server) answers each ranged read with the
    whole file, which was taken for the range: the sidecar's first header looked wrong
    ('the index is stale'), and a record read past it would be the file's start."""
    directory, base, server = http_dir
    server.ranges = False
    records = [b"r%d" % i for i in range(10)]
    (directory / "s.tfrecord").write_bytes(framed(records))
    tfl.build_index(str(directory / "s.tfrecord"))
    f = tfl.TFRecordFile(f"{base}/s.tfrecord")
    assert f[5] == b"r5" and f[2:4] == records[2:4] and f[-1] == b"r9"
    assert tfl.IndexedDataset(f"{base}/s.tfrecord")[[7, 3]] == [b"r7", b"r3"]


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_streaming_from_a_server_that_ignores_range(http_dir, monkeypatch, compression):
    """fsspec reads an HTTP file in ranged blocks and refuses every block after the first
    from a server that ignores Range ("doesn't appear to support range requests"), so a file
    larger than one block could not be read at all; it reads on through one plain GET."""
    from tfrecord_lite import fs as tfs

    directory, base, server = http_dir
    server.ranges = False
    monkeypatch.setattr(tfs, "BLOCK_BYTES", 1 << 16)
    records = [os.urandom(5000) for _ in range(60)]  # 300 kB: several blocks
    data = framed(records)
    (directory / "big.tfrecord").write_bytes(gzip.compress(data) if compression else data)
    url = f"{base}/big.tfrecord"
    assert list(tfl.TFRecordReader(url)) == list(tfl.TFRecordDataset(url)) == records
    if compression is None:
        offset = len(framed(records[:40]))
        assert list(tfl.TFRecordReader(url, start_offset=offset)) == records[40:]


def test_a_read_only_store_is_counted_without_writing_a_sidecar(http_dir):
    """count_records keeps a scan as the file's sidecar where it can; HTTP cannot be written
    (a read-only file system error), which is no reason to fail the count."""
    directory, base, _ = http_dir
    (directory / "b.tfrecord").write_bytes(framed([b"x"] * 5))
    assert count_records(f"{base}/b.tfrecord") == 5
    assert not (directory / "b.tfrecord.index").exists()
    tfl.build_index(str(directory / "b.tfrecord"))
    assert tfl.TFRecordFile(f"{base}/b.tfrecord")[4] == b"x"  # a sidecar beside a plain URL is read


def test_a_file_of_unknown_size_is_read_and_refused_what_needs_its_size(http_dir):
    """A response without Content-Length (a dynamic or compressing server) streams; what
    needs the size (counting, indexing, random access) says so, naming the URL, instead of
    failing with int(None)'s TypeError."""
    directory, base, server = http_dir
    server.lengths = False
    (directory / "c.tfrecord").write_bytes(framed([b"a", b"bb"]))
    url = f"{base}/c.tfrecord"
    assert list(tfl.TFRecordDataset(url)) == [b"a", b"bb"]
    for call in (lambda: count_records(url), lambda: tfl.TFRecordFile(url),
                 lambda: tfl.TFRecordDataset(url).num_elements()):
        with pytest.raises(TFRecordError, match="its size is unknown: the server sends no Content-Length") as info:
            call()
        assert info.value.path == url and "Read it as a stream" in str(info.value)


def test_a_refused_or_missing_url_with_a_query_says_so_naming_it(http_dir):
    """An expired presigned URL (403) is the named PermissionError that S3's refusals are,
    not 'no such file' (fsspec's http reports any failure so) nor 'no TFRecord files found'
    (its '?' taken for a glob); a missing one is a FileNotFoundError naming it."""
    from tfrecord_lite.cli import main

    directory, base, server = http_dir
    (directory / "a.tfrecord").write_bytes(framed([b"a"]))
    url = f"{base}/a.tfrecord?X-Amz-Signature=old"
    calls = (lambda: list(tfl.TFRecordReader(url)), lambda: list(tfl.TFRecordDataset(url)),
             lambda: tfl.TFRecordFile(url), lambda: count_records(url))
    server.refuse = True
    for call in calls:
        with pytest.raises(PermissionError, match=r"the object store denied access \(403") as info:
            call()
        assert info.value.filename == url
    assert main(["count", url]) == 1
    server.refuse = False
    url = f"{base}/none.tfrecord?X-Amz-Signature=abc"
    for call in calls:
        with pytest.raises(FileNotFoundError) as info:
            call()
        assert info.value.filename == url


def test_writing_to_http_says_it_cannot_be_written_naming_the_url(http_dir, capfd):
    """fsspec's http filesystem cannot write: it raised a bare NotImplementedError (no message,
    no URL), at open or, through simplecache::, at close. It is now a read-only file system
    error naming the URL, and nothing is left behind."""
    import errno

    from tfrecord_lite.cli import main

    directory, base, _ = http_dir
    src = directory / "in.tfrecord"
    src.write_bytes(framed([b"a"]))
    for url in (f"{base}/out.tfrecord", f"simplecache::{base}/out.tfrecord"):
        for atomic in (True, False):
            with pytest.raises(OSError, match="http:// URLs cannot be written: write to a local path") as info:
                with tfl.TFRecordWriter(url, atomic=atomic) as w:
                    w.write(b"x")
            assert info.value.errno == errno.EROFS and info.value.filename == url
        assert main(["cat", str(src), "-o", url]) == 1
        assert f"{url}: http:// URLs cannot be written" in capfd.readouterr().err
    assert sorted(os.listdir(directory)) == ["in.tfrecord"]
