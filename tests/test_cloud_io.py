"""Remote paths for TFRecordReader and TFRecordWriter: a real S3 API (moto's server on
loopback, through s3fs) and fsspec's memory://; file:// and local paths stay local."""

import functools
import gzip
import http.client
import http.server
import io
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import zipfile
import zlib

import pytest
from hypothesis import given, settings, strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import fs as tfs
from tfrecord_lite.cli import main
from tfrecord_lite.files import resolve_files
from tfrecord_lite.errors import CorruptRecordError, InvalidArgumentError, TFRecordError, TruncatedRecordError
from tfrecord_lite.index import count_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
records_st = st.lists(st.binary(max_size=300), max_size=40)


@pytest.fixture
def gets(monkeypatch):
    """The GETs SignedStreams send, as their header dicts."""
    sent, real = [], http.client.HTTPConnection.request

    def counting(self, method, url, body=None, headers={}, **kwargs):
        if method == "GET":
            sent.append(dict(headers))
        return real(self, method, url, body, headers, **kwargs)

    monkeypatch.setattr(http.client.HTTPConnection, "request", counting)
    return sent


def drop_connection(monkeypatch, after_calls, times=1):
    """Make HTTPResponse.readinto fail as a reset connection would, `times` times, once
    `after_calls` reads have succeeded."""
    real, calls = http.client.HTTPResponse.readinto, [0, 0]

    def flaky(self, view):
        calls[0] += 1
        if calls[0] > after_calls and calls[1] < times:
            calls[1] += 1
            raise ConnectionResetError("connection reset by peer")
        return real(self, view)

    monkeypatch.setattr(http.client.HTTPResponse, "readinto", flaky)


def frames(records, compression=None):
    path_free = bytearray()
    for r in records:
        tfl._native.framing.append_frame(path_free, r)
    data = bytes(path_free)
    if compression == "gzip":
        return gzip.compress(data)
    if compression == "zlib":
        return zlib.compress(data)
    return data


def test_url_detection():
    assert tfs.is_url("s3://b/k") and tfs.is_url("memory://x") and tfs.is_url("simplecache::s3://b/k")
    assert not tfs.is_url("file:///tmp/x") and not tfs.is_url("/tmp/x") and not tfs.is_url("a/b:c")
    assert not tfs.is_url(b"s3://b") and not tfs.is_url(os.path.join("x", "y"))
    assert tfs.local_path("file:///tmp/x") == "/tmp/x" and tfs.local_path("file://localhost/tmp/x") == "/tmp/x"
    assert not tfs.is_url("local:///tmp/x") and tfs.local_path("local:///tmp/x") == "/tmp/x"
    pinned = ["s3://b/k?versionId=v", "simplecache::s3://b/k?versionId=v", "gs://b/k#1", "gcs://b/k?generation=1",
              "https://h/k?X-Amz-Signature=s"]
    assert all(map(tfs.pinned, pinned))
    assert not tfs.pinned("zip://a.tfrecord::https://h/x.zip?X-Amz-Signature=s")  # a file inside it
    assert tfs.beside("zip://a.tfrecord::s3://b/x.zip", ".index") == "zip://a.tfrecord.index::s3://b/x.zip"
    assert tfs.beside("simplecache::s3://b/k", ".index") == "simplecache::s3://b/k.index"
    assert not any(map(tfs.pinned, ["s3://b/k?x", "s3://b/k#1", "gs://b/k?x", "memory://k?versionId=v",
                                    "/k?versionId=v"]))


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
@settings(max_examples=8)
@given(records=records_st)
def test_s3_round_trip_any_compression(s3, backend, compression, records):
    url = s3.url(f"rt-{compression}-{len(records)}.tfrecord")
    with tfl.TFRecordWriter(url, compression) as w:
        w.write_many(records)
    assert w.records_written == len(records)
    stored = s3.get(url.rsplit("/", 1)[1])
    assert {None: bytes, "gzip": gzip.decompress, "zlib": zlib.decompress}[compression](stored) == frames(records)
    for mode in ("auto", compression):
        assert list(tfl.TFRecordReader(url, compression=mode)) == records


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
def test_s3_reads_files_written_by_anything_with_auto_detection(s3, s3_reads, backend, compression):
    records = [os.urandom(n) for n in (0, 1, 100, 5000, 70000)] * 5
    url = s3.put(f"in.tfrecord.{compression}", frames(records, compression))
    reader = tfl.TFRecordReader(url)
    assert list(reader) == records
    batches = list(tfl.TFRecordReader(url).record_batches(7))
    assert [r for b in batches for r in b] == records
    if compression is None:  # an uncompressed file starts at a frame's offset with a seek
        at = sum(16 + len(r) for r in records[:7])
        assert list(tfl.TFRecordReader(url, start_offset=at, start_index=7)) == records[7:]


def test_memory_round_trip_and_storage_options(memfs, backend):
    records = [b"a" * n for n in range(50)]
    with tfl.TFRecordWriter(memfs.url("x.tfrecord"), "gzip", storage_options={}) as w:
        w.write_many(records)
    assert list(tfl.TFRecordReader(memfs.url("x.tfrecord"), storage_options={})) == records
    assert memfs.fs.ls(memfs.prefix, detail=False) == [f"{memfs.prefix}/x.tfrecord"]


def test_storage_options_reach_s3fs(s3, monkeypatch):
    """With the SDK's environment gone, storage_options alone find the server."""
    import s3fs

    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    s3fs.S3FileSystem.clear_instance_cache()
    so = s3.storage_options
    with tfl.TFRecordWriter(s3.url("so.tfrecord"), storage_options=so) as w:
        w.write(b"x")
    assert list(tfl.TFRecordReader(s3.url("so.tfrecord"), storage_options=so)) == [b"x"]
    bad = {**so, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}
    with pytest.raises(Exception):
        list(tfl.TFRecordReader(s3.url("so.tfrecord"), storage_options={**bad, "config_kwargs": {
            "retries": {"max_attempts": 1}, "connect_timeout": 1}}))


def test_s3_streams_each_object_through_one_get(s3, gets, monkeypatch):
    """Thousands of small records cost one GET, received straight into the reader."""
    import s3fs

    records = [os.urandom(200) for _ in range(100_000)]  # about 22 MB
    url = s3.put("many.tfrecord", frames(records))

    def through_the_sdk(*args, **kwargs):
        raise AssertionError("object bytes went through s3fs")

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", through_the_sdk)
    monkeypatch.setattr(s3fs.S3FileSystem, "_cat_file", through_the_sdk)
    with tfl.TFRecordReader(url) as reader:
        assert isinstance(reader._file, tfs.SignedStream)
        assert list(reader) == records
    assert gets == [{}]  # no Range: from the start to the end


def test_s3_ranged_reads_fetch_large_blocks(s3, monkeypatch):
    """Where a presigned URL cannot be used, fsspec reads large ranged blocks, never one
    request per record."""
    import s3fs

    monkeypatch.setattr(tfs, "_signs_urls", lambda fs: False)
    records = [os.urandom(200) for _ in range(100_000)]  # about 22 MB: two blocks
    url = s3.put("many.tfrecord", frames(records))
    calls = []
    real = s3fs.core.S3File._fetch_range

    def counted(self, start, end):
        calls.append((start, end))
        return real(self, start, end)

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", counted)
    assert list(tfl.TFRecordReader(url)) == records
    size = 100_000 * 216
    assert len(calls) == -(-size // tfs.BLOCK_BYTES) == 2  # each block fetched once
    assert all(end - start >= min(tfs.BLOCK_BYTES, size - start) for start, end in calls)


def test_s3_stream_resumes_a_dropped_connection_at_the_same_byte(s3, gets, monkeypatch, backend):
    records = [os.urandom(1000) for _ in range(3000)]
    url = s3.put("drop.tfrecord", frames(records))
    drop_connection(monkeypatch, after_calls=3, times=2)
    assert list(tfl.TFRecordReader(url, chunk_size=1 << 16)) == records
    assert len(gets) == 3 and gets[0] == {}
    etag = s3.fs.info(url)["ETag"]
    resumed = [int(g["Range"][len("bytes="):-1]) for g in gets[1:]]
    # Where the reads stopped (both retries at the same byte), not at the start again.
    assert resumed[0] == resumed[1] and 0 < resumed[0] < 3 << 16
    assert all(g["If-Match"] == etag for g in gets[1:])


@settings(max_examples=25, deadline=None)
@given(records=st.lists(st.binary(max_size=3000), max_size=60), gaps=st.lists(st.integers(2, 9), max_size=6),
       chunk=st.integers(64, 4096))
def test_s3_stream_survives_drops_anywhere(s3, records, gaps, chunk):
    """Connections dropped at any read (never twice in a row) cost nothing but a GET each:
    the records come back whole and in order."""
    url = s3.put("anywhere.tfrecord", frames(records))
    drops = set(itertools.accumulate(gaps))
    real, calls = http.client.HTTPResponse.readinto, [0]

    def flaky(self, view):
        calls[0] += 1
        if calls[0] in drops:
            raise ConnectionResetError("connection reset by peer")
        return real(self, view)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(http.client.HTTPResponse, "readinto", flaky)
        assert list(tfl.TFRecordReader(url, chunk_size=chunk)) == records


@pytest.fixture
def signed_by_http(tmp_path):
    """(signer, handler class) for a SignedStream served by a loopback HTTP server of tmp_path
    (SimpleHTTPRequestHandler: it ignores Range, answering 200 with the whole file), as an
    S3-compatible store or a proxy might; the signer is what SignedStream asks of s3fs."""
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    class Signer:
        def sign(self, path, expiration):
            return f"http://127.0.0.1:{server.server_address[1]}/{path}"

    yield Signer(), Handler
    server.shutdown()
    server.server_close()


def test_a_store_that_sends_no_length_is_read_through_the_filesystem(signed_by_http, tmp_path, monkeypatch):
    """A first response without Content-Length (chunked, as a store may send a transcoded
    object) failed with a bare TypeError from int(None); the stream declines, and
    open_input reads the object through the filesystem instead."""
    from tfrecord_lite._streams import _NotSigned

    signer, handler = signed_by_http
    (tmp_path / "obj").write_bytes(os.urandom(1000))
    send_header = http.server.SimpleHTTPRequestHandler.send_header
    monkeypatch.setattr(handler, "send_header", lambda self, key, value: None if key == "Content-Length"
                        else send_header(self, key, value), raising=False)
    with pytest.raises(_NotSigned):
        tfs.SignedStream(signer, "obj", "s3://b/obj")


def test_a_stream_from_a_store_that_ignores_range_reads_the_right_bytes(signed_by_http, tmp_path, monkeypatch):
    """A resumed or seeking GET asks for bytes=N-; a store that ignores Range answers 200 with
    the whole object, which was read as if it started at N: the object's first bytes,
    spliced in."""
    data = os.urandom(300_000)
    (tmp_path / "obj").write_bytes(data)
    stream = tfs.SignedStream(signed_by_http[0], "obj", "s3://b/obj")
    assert stream.read(1000) == data[:1000]
    stream.seek(200_000)
    assert stream.read(1000) == data[200_000:201_000]
    drop_connection(monkeypatch, after_calls=0)
    assert stream.read() == data[201_000:]
    stream.close()


def test_a_stream_refused_when_it_resumes_is_a_denial(signed_by_http, tmp_path, monkeypatch):
    """Credentials that expire during a long read make the resuming GET fail with 403: that
    was reported as a network failure ('failed after 4 attempts: HTTPException'); it is the
    named PermissionError that a refusal at open is."""
    signer, handler = signed_by_http
    (tmp_path / "obj").write_bytes(os.urandom(100_000))
    monkeypatch.setattr(handler, "send_head", lambda self: self.send_error(403) if "Range" in self.headers
                        else http.server.SimpleHTTPRequestHandler.send_head(self), raising=False)
    stream = tfs.SignedStream(signer, "obj", "s3://b/obj")
    stream.seek(10)
    with pytest.raises(PermissionError, match=r"the object store denied access \(HTTP 403") as info:
        stream.read(100)
    assert info.value.filename == "s3://b/obj"


def test_s3_object_replaced_during_a_read_is_an_error(s3, monkeypatch):
    records = [os.urandom(1000) for _ in range(3000)]
    url = s3.put("moving.tfrecord", frames(records))
    reader = iter(tfl.TFRecordReader(url, chunk_size=1 << 16))
    assert next(reader) == records[0]
    s3.put("moving.tfrecord", frames(records[::-1]))
    drop_connection(monkeypatch, after_calls=0)
    with pytest.raises(TFRecordError, match="changed while it was read") as err:
        list(reader)
    assert err.value.path == url and err.value.offset > 0 and err.value.hint


def test_s3_object_replaced_during_a_ranged_read_is_the_same_error(s3, monkeypatch):
    """Read in ranged blocks (settings a presigned URL cannot carry), a replaced object
    raised s3fs's bare OSError 'Errno 16 ... no longer exists'; it is the TFRecordError a
    streamed read raises, naming the file and the byte reached."""
    monkeypatch.setattr(tfs, "_signs_urls", lambda filesystem: False)
    monkeypatch.setattr(tfs, "BLOCK_BYTES", 1 << 16)
    records = [os.urandom(1000) for _ in range(1000)]
    url = s3.put("moving.tfrecord", frames(records))
    reader = iter(tfl.TFRecordReader(url, chunk_size=1 << 16))
    assert next(reader) == records[0]
    s3.put("moving.tfrecord", frames(records[::-1]))
    with pytest.raises(TFRecordError, match="changed while it was read") as err:
        list(reader)
    assert err.value.path == url and err.value.offset >= 1 << 16 and "again" in err.value.hint


def test_s3_stream_gives_up_after_repeated_drops(s3, monkeypatch):
    url = s3.put("gone.tfrecord", frames([os.urandom(1000) for _ in range(300)]))
    drop_connection(monkeypatch, after_calls=1, times=10)
    with pytest.raises(TFRecordError, match="failed at byte .* after 4 attempts: ConnectionResetError") as err:
        list(tfl.TFRecordReader(url, chunk_size=1 << 16))
    assert err.value.path == url and err.value.offset == 12  # after the first frame's header
    assert "network" in err.value.hint


def test_s3_presigned_only_where_the_url_carries_the_settings(s3, monkeypatch):
    import s3fs

    url = s3.put("plain.tfrecord", frames([b"a", b"b"]))
    so = s3.storage_options

    def opened(**extra):
        s3fs.S3FileSystem.clear_instance_cache()
        with tfs.open_input(url, {**so, **extra}) as f:
            assert f.read() == frames([b"a", b"b"])
            return isinstance(f, tfs.SignedStream)

    assert opened()
    assert not opened(requester_pays=True)
    assert not opened(s3_additional_kwargs={"SSECustomerAlgorithm": "AES256"})
    proxied = s3fs.S3FileSystem(**so, config_kwargs={"proxies": {"http": "http://127.0.0.1:9"}})
    assert not tfs._signs_urls(proxied) and tfs._signs_urls(s3fs.S3FileSystem(**so))
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # so the SDK itself still reaches the server
    assert not opened()
    monkeypatch.delenv("HTTP_PROXY")
    assert opened()
    # A store that refuses the presigned GET is read through the SDK instead.
    monkeypatch.setattr(tfs.SignedStream, "_open", lambda self, first=False: (_ for _ in ()).throw(
        tfs._NotSigned(403)))
    assert not opened()


def test_s3_corrupt_data_names_url_offset_and_record(s3, s3_reads, tmp_path, backend):
    data = bytearray(frames([b"alpha", b"beta" * 10, b"gamma"]))
    data[21 + 12 + 3] ^= 0x40  # a data byte of record 1 (record 0's frame is 21 bytes)
    url = s3.put("bad.tfrecord", bytes(data))
    local = tmp_path / "bad.tfrecord"
    local.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as remote_err:
        list(tfl.TFRecordReader(url))
    with pytest.raises(CorruptRecordError) as local_err:
        list(tfl.TFRecordReader(str(local)))
    e = remote_err.value
    assert (e.path, e.offset, e.index) == (url, 21, 1)
    assert url in str(e) and "corrupted record at 33" in str(e)
    assert str(e).replace(url, str(local)) == str(local_err.value)
    skipping = tfl.TFRecordReader(url, on_corrupt="skip")
    assert list(skipping) == [b"alpha", b"gamma"] and skipping.skipped[0].path == url

    s3.put("short.tfrecord", bytes(data[:-3]))
    with pytest.raises(TruncatedRecordError, match="truncated record at 77: it ends at byte 98 but the input has 95") as err:
        list(tfl.TFRecordReader(s3.url("short.tfrecord"), check_crc=False))
    assert err.value.path == s3.url("short.tfrecord") and err.value.index == 2
    s3.put("bad.tfrecord.gz", gzip.compress(frames([b"alpha"] * 50))[:-9])
    with pytest.raises(tfl.DataLossError, match="gzip stream") as err:
        list(tfl.TFRecordReader(s3.url("bad.tfrecord.gz")))
    assert err.value.path == s3.url("bad.tfrecord.gz")


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_file_inside_an_archive_on_s3_reads(s3, backend, compression):
    """zip://a.tfrecord::s3://b/x.zip: the zip filesystem that opens the member owns the
    archive's S3 handle and closes it when it is collected, which left the member's reads on
    a closed file ("I/O operation on closed file")."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.tfrecord", frames([b"a0", b"a1"], compression))
    url = "zip://a.tfrecord::" + s3.put("x.zip", archive.getvalue())
    assert list(tfl.TFRecordReader(url, compression)) == [b"a0", b"a1"]
    assert list(tfl.TFRecordDataset(url)) == [b"a0", b"a1"]


def test_storage_options_the_filesystem_refuses_are_named(s3, s3_versioned):
    """A misspelt storage option surfaced at the first request as the SDK's TypeError
    ("AioSession.__init__() got an unexpected keyword argument 'anonn'"), and version_aware=False
    beside a URL naming a version as fsspec's ("dict() got multiple values for keyword
    argument"), naming neither the URL nor storage_options."""
    url = s3.put("a.tfrecord", frames([b"a"]))
    calls = (lambda so: list(tfl.TFRecordReader(url, storage_options=so)),
             lambda so: resolve_files(s3.url("*.tfrecord"), so),
             lambda so: count_records(url, storage_options=so))
    for call in calls:
        with pytest.raises(InvalidArgumentError, match="does not take these storage_options .*'anonn'") as info:
            call({"anonn": True})
        assert "Check storage_options" in str(info.value)
    with tfl.TFRecordWriter(s3_versioned.url("v.tfrecord")) as w:
        w.write(b"v")
    pinned = f"{s3_versioned.url('v.tfrecord')}?versionId={s3_versioned.version('v.tfrecord')}"
    assert list(tfl.TFRecordReader(pinned, storage_options={"version_aware": True})) == [b"v"]
    with pytest.raises(InvalidArgumentError, match="leave it out of storage_options") as info:
        tfl.TFRecordReader(pinned, storage_options={"version_aware": False})
    assert info.value.path == pinned


def test_an_index_file_that_was_given_must_exist(s3, tmp_path):
    """TFRecordFile(path, index_file) with a misspelt or missing index file scanned the whole
    file in silence; it raises FileNotFoundError naming the index file, locally and remotely.
    Without index_file, a missing sidecar still means a scan."""
    local = tmp_path / "a.tfrecord"
    with tfl.TFRecordWriter(local) as w:
        w.write_many([b"a", b"b"])
    remote = s3.put("a.tfrecord", local.read_bytes())
    for path, index in ((str(local), str(tmp_path / "typo.idx")), (remote, s3.url("typo.idx"))):
        assert len(tfl.TFRecordFile(path)) == 2
        with pytest.raises(FileNotFoundError) as info:
            tfl.TFRecordFile(path, index)
        assert info.value.filename == index
    tfl.build_index(remote, s3.url("a.idx"))
    assert tfl.TFRecordFile(remote, s3.url("a.idx"))[1] == b"b"


def test_missing_remote_file_names_the_url(s3, memfs):
    for url in (s3.url("nope.tfrecord"), memfs.url("nope.tfrecord")):
        with pytest.raises(FileNotFoundError, match="nope.tfrecord") as err:
            tfl.TFRecordReader(url)
        assert err.value.filename == url
    with pytest.raises(TFRecordError, match="no filesystem|cannot open") as err:
        tfl.TFRecordReader("nosuchscheme123://x/y")
    assert err.value.hint


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_s3_exception_inside_with_leaves_no_object(s3, compression):
    url = s3.url("partial.tfrecord")
    with pytest.raises(KeyError):
        with tfl.TFRecordWriter(url, compression, index=compression is None) as w:
            w.write_many([os.urandom(1 << 20) for _ in range(40)])  # past one upload part
            w.flush()
            raise KeyError("boom")
    assert s3.ls() == []
    assert s3.multipart_uploads() == []  # aborted, not left behind


def test_s3_large_file_is_one_object_after_close(s3):
    records = [os.urandom(1 << 20) for _ in range(40)]  # 40 MiB: three upload parts
    url = s3.url("big.tfrecord")
    w = tfl.TFRecordWriter(url, index=True)
    w.write_many(records)
    w.flush()
    assert s3.ls() == []  # nothing under the final name before close
    w.close()
    assert s3.ls() == ["big.tfrecord", "big.tfrecord.index"]
    assert s3.get("big.tfrecord") == frames(records)
    assert s3.multipart_uploads() == []


def test_s3_killed_writer_leaves_no_object(s3, s3_server):
    """SIGKILL in the middle of a multipart upload: no object under the final name."""
    url = s3.url("killed.tfrecord")
    script = textwrap.dedent(f"""
        import os, sys, time
        import tfrecord_lite as tfl
        w = tfl.TFRecordWriter({url!r})
        for _ in range(40):
            w.write(os.urandom(1 << 20))
        w.flush()
        print("uploading", flush=True)
        time.sleep(60)
    """)
    env = {**os.environ, **s3_server.env, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "uploading"
        assert len(s3.multipart_uploads()) == 1  # parts were really sent
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert s3.ls() == []


def test_memory_exception_leaves_nothing_and_temp_is_hidden(memfs):
    url = memfs.url("x.tfrecord")
    w = tfl.TFRecordWriter(url, index=True)
    w.write(b"abc")
    w.flush()
    names = memfs.fs.ls(memfs.prefix, detail=False)
    assert names and all(n.rsplit("/", 1)[1].startswith(".") for n in names)  # temporaries only
    w.abort()
    assert not memfs.fs.exists(memfs.prefix) or memfs.fs.ls(memfs.prefix) == []
    with pytest.raises(RuntimeError):
        with tfl.TFRecordWriter(url) as w:
            w.write(b"abc")
            raise RuntimeError
    assert not memfs.fs.exists(url)


def test_a_name_with_glob_characters_is_written_as_it_is(memfs, backend):
    """TFRecordWriter('memory://d/a[1].tfrecord') wrote a temporary name, then fsspec's mv
    read it as a glob that matched nothing: 'No such file'. A bracket in the first
    component (memory://d[1]/...) failed sooner, in urlsplit ('not an IPv6 address')."""
    for url in (memfs.url("d/a[1].tfrecord"), f"memory://{memfs.prefix[1:]}[1]/a?.tfrecord"):
        with tfl.TFRecordWriter(url, index=True) as w:
            w.write(b"abc")
        assert list(tfl.TFRecordReader(url)) == [b"abc"] and tfl.TFRecordFile(url)[0] == b"abc"
        assert resolve_files(url) == [url]
    for name in ("a?.tfrecord", "a?.tfrecord.index"):
        memfs.fs.rm_file(f"{memfs.prefix}[1]/{name}")
    assert memfs.fs.ls(memfs.prefix + "/d", detail=False) == [memfs.prefix + "/d/a[1].tfrecord",
                                                               memfs.prefix + "/d/a[1].tfrecord.index"]
    assert backend.name == tfl.implementation


def test_a_ranged_read_of_an_object_gone_since_names_it(s3, monkeypatch):
    """An object deleted after its sidecar was read failed TFRecordFile's and Ray's ranged
    reads with "The specified key does not exist.", naming no URL."""
    import tfrecord_lite.ray as tfl_ray

    url = s3.url("a.tfrecord")
    with tfl.TFRecordWriter(url, index=True) as w:
        w.write_many([b"x" * 600] * 8)
    monkeypatch.setattr(tfl_ray, "_PIECE_BYTES", 1024)
    tasks = tfl_ray.TFRecordDatasource(url, raw=True).get_read_tasks(4)
    f = tfl.TFRecordFile(url)
    s3.fs.rm_file(url[len("s3://"):])
    for read in (lambda: f[3], lambda: f[1:5], lambda: list(tasks[1]())):
        with pytest.raises(FileNotFoundError) as info:
            read()
        assert info.value.filename == url


def test_committing_replaces_a_stale_sidecar(s3):
    s3.put("x.tfrecord.index", b"0 99\n")
    with tfl.TFRecordWriter(s3.url("x.tfrecord")) as w:
        w.write(b"new")
    assert s3.ls() == ["x.tfrecord"]


def test_an_object_version_is_read_has_no_sidecar_and_is_never_written(s3_versioned, backend):
    """s3://b/k?versionId=v reads that version. ".index" appended to it names version
    "v.index" of k, so counting it wrote its scan over k as a new current version; the bare
    name's sidecar describes another version. Such a URL is scanned (no sidecar), is no
    glob, and cannot be written."""
    store = s3_versioned
    url = store.url("d.tfrecord")
    with tfl.TFRecordWriter(url) as w:
        w.write_many([b"old0", b"old1"])
    old = f"{url}?versionId={store.version('d.tfrecord')}"
    with tfl.TFRecordWriter(url, index=True) as w:
        w.write(b"new")
    assert count_records(old) == 2
    assert list(tfl.TFRecordReader(old)) == list(tfl.TFRecordDataset(old)) == [b"old0", b"old1"]
    assert tfl.TFRecordFile(old)[1] == b"old1" and len(tfl.IndexedDataset(old)) == 2
    with pytest.raises(InvalidArgumentError, match="object version") as info:
        tfl.build_index(old)
    assert "Pass index_file" in str(info.value)
    for atomic in (True, False):
        with pytest.raises(InvalidArgumentError, match="cannot be written") as info:
            tfl.TFRecordWriter(old, atomic=atomic)
        assert info.value.path == old
    assert store.get("d.tfrecord") == frames([b"new"])  # the current version is untouched
    assert store.ls() == ["d.tfrecord", "d.tfrecord.index"]


@pytest.mark.parametrize("scheme", ["file://", "local://"])
def test_file_urls_and_local_paths_never_import_fsspec(tmp_path, scheme):
    """local:// (fsspec's other name for local files) went through fsspec: no mmap, pread
    or copy_file_range, and a hard dependency on fsspec for a local file."""
    script = textwrap.dedent(f"""
        import sys
        import tfrecord_lite as tfl
        path, scheme = {str(tmp_path / "a.tfrecord")!r}, {scheme!r}
        with tfl.TFRecordWriter(scheme + path, index=True) as w:
            w.write(b"one")
        with tfl.TFRecordWriter(path + ".gz", "gzip") as w:
            w.write(b"two")
        assert list(tfl.TFRecordReader(scheme + path)) == [b"one"]
        assert list(tfl.TFRecordReader(path + ".gz")) == [b"two"]
        assert list(tfl.TFRecordDataset(scheme + {str(tmp_path)!r})) == [b"one", b"two"]
        assert tfl.TFRecordFile(scheme + path)[0] == b"one"
        tfl.merge([path, path + ".gz"], scheme + path + ".all")
        bad = [m for m in ("fsspec", "s3fs", "botocore", "aiobotocore") if m in sys.modules]
        assert not bad, bad
    """)
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": ROOT},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "a.tfrecord.index").read_text() == "0 19\n"


def test_s3_failed_sidecar_upload_leaves_no_object(s3, monkeypatch):
    """close() that fails on the sidecar's upload raises and publishes neither object: the
    data object, already completed, is deleted again."""
    import s3fs

    real = s3fs.core.S3File._call_s3

    def failing(self, method, *args, **kwargs):
        if method == "complete_multipart_upload" and self.path.endswith(".index"):
            raise OSError(5, "injected network failure")
        return real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.core.S3File, "_call_s3", failing)
    with pytest.raises(OSError, match="injected"):
        with tfl.TFRecordWriter(s3.url("x.tfrecord"), index=True) as w:
            w.write_many([b"a", b"b"])
    assert s3.ls() == []
    assert s3.multipart_uploads() == []


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_s3_upload_failing_half_way_names_the_url_and_leaves_nothing(s3, monkeypatch, compression):
    """A part upload that fails (the network) raised the SDK's OSError naming no file, where
    a local write's error names the path; it names the URL, and nothing is published."""
    import s3fs

    real, parts = s3fs.core.S3File._call_s3, []

    def failing(self, method, *args, **kwargs):
        if method == "upload_part":
            parts.append(1)
            if len(parts) == 2:
                raise OSError(5, "injected network failure")
        return real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.core.S3File, "_call_s3", failing)
    url = s3.url("x.tfrecord")
    with pytest.raises(OSError, match="injected network failure") as info:
        with tfl.TFRecordWriter(url, compression, index=compression is None) as w:
            for _ in range(60):  # past three upload parts
                w.write(os.urandom(1 << 20))
    assert info.value.filename == url
    assert s3.ls() == [] and s3.multipart_uploads() == []


def test_a_url_naming_a_bucket_is_no_file(s3_server):
    """s3://my-bucket (no key) as a writer's output said 's3:// URLs cannot be written' (s3fs's
    'non key-like path', or botocore's ParamValidationError without the atomic write), and as
    a reader's input botocore's ParamValidationError: it names a bucket, so it is a directory."""
    url = "s3://my-bucket"
    for call in (lambda: tfl.TFRecordWriter(url), lambda: tfl.TFRecordWriter(url, atomic=False),
                 lambda: tfl.TFRecordReader(url)):
        with pytest.raises(IsADirectoryError, match="names a bucket, not a file: give a file in it, such as "
                                                     "s3://my-bucket/data.tfrecord") as info:
            call()
        assert info.value.filename == url


@pytest.mark.parametrize("atomic", [True, False])
def test_a_url_on_a_filesystem_with_directories_gets_its_missing_ones(tmp_path, atomic):
    """Writing to sftp:// (here dir://, over local files) under a missing directory failed
    with 'No such file' naming the hidden temporary name; missing directories are made, as
    for a local path, and an error that names a file names the output URL."""
    options = {"path": str(tmp_path), "target_protocol": "file"}
    with tfl.TFRecordWriter("dir://a/b/x.tfrecord", atomic=atomic, storage_options=options) as w:
        w.write(b"abc")
    assert list(tfl.TFRecordReader(tmp_path / "a" / "b" / "x.tfrecord")) == [b"abc"]
    (tmp_path / "file").write_bytes(b"")
    url = "dir://file/x.tfrecord"
    with pytest.raises(OSError) as info:
        with tfl.TFRecordWriter(url, atomic=atomic, storage_options=options) as w:
            w.write(b"abc")
    assert info.value.filename == url and ".tmp" not in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["a", "file"]


@pytest.mark.parametrize("store", ["s3", "memfs"])
def test_an_input_url_naming_a_directory_says_so(request, store, s3_reads):
    """A directory (a key prefix on S3) given where a file is read said 'No such file or
    directory', and its size was 0; it is an IsADirectoryError naming it."""
    store = request.getfixturevalue(store)
    store.fs.pipe_file(store.url("d/sub/a.tfrecord").split("://", 1)[1], b"")
    url = store.url("d/sub")
    for call in (lambda: tfl.TFRecordReader(url), lambda: list(tfl.TFRecordDataset([url])),
                 lambda: tfl.TFRecordFile(url), lambda: count_records(url), lambda: tfs.size(url),
                 lambda: tfl.TFRecordReader(url + "/")):
        with pytest.raises(IsADirectoryError, match="names a directory, not a file: give a file in it") as info:
            call()
        assert info.value.filename in (url, url + "/")
    with pytest.raises(FileNotFoundError, match="No such file"):
        tfl.TFRecordReader(url + "/missing")


@pytest.mark.parametrize("atomic", [True, False])
def test_an_output_url_ending_with_a_slash_is_refused_up_front(s3, memfs, capfd, tmp_path, atomic):
    """A URL ending with "/" names a directory: the object store would keep the data under
    the name without its "/". Refused when the writer opens, as a local directory is."""
    src = tmp_path / "in.tfrecord"
    with tfl.TFRecordWriter(src) as w:
        w.write(b"abc")
    says = "names a directory, not a file: give the output a file name"
    for store in (s3, memfs):
        out = store.url("dir") + "/"
        with pytest.raises(IsADirectoryError, match=says) as info:
            tfl.TFRecordWriter(out, atomic=atomic)
        assert info.value.filename == out and f"such as {out}out.tfrecord" in str(info.value)
        with pytest.raises(IsADirectoryError, match=says):
            tfl.merge([src], out)
        assert main(["cat", str(src), "-o", out]) == 1
        assert says in capfd.readouterr().err
    assert s3.ls() == [] and not memfs.fs.exists(memfs.prefix)
