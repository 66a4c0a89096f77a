"""Every path-taking API with remote paths: resolution, datasets (sharding, the handle
bound), random access, merge/split between S3 and local disk, sharded and parallel writes,
to_numpy/to_npy and the CLI, against the loopback S3 server and memory://."""

import gzip
import io
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import tfrecord_lite as tfl
from tfrecord_lite import cli
from tfrecord_lite import fs as tfs
from tfrecord_lite.files import resolve_files
from tfrecord_lite.errors import CorruptRecordError, EncodeError, TFRecordError
from tfrecord_lite.index import count_records

SPEC = {"id": tfl.FixedLenFeature([], np.int64), "v": tfl.FixedLenFeature([3], np.float32)}


def example(i):
    return tfl.encode_example({"id": i, "v": np.full(3, i, np.float32)})


def framed(records):
    buf = bytearray()
    for r in records:
        tfl._native.framing.append_frame(buf, r)
    return bytes(buf)


def put_shards(target, n_files, per_file, compress_every=0):
    """n_files shards of Examples with ids file*per_file + j; every compress_every-th gzip."""
    urls = []
    for f in range(n_files):
        data = framed([example(f * per_file + j) for j in range(per_file)])
        if compress_every and f % compress_every == 0:
            data = gzip.compress(data)
        urls.append(target.put(f"data/part-{f:03d}.tfrecord", data))
    return urls


def ids(batches):
    return sorted(int(i) for b in batches for i in np.atleast_1d(b["id"]))


class Mem:
    """memory:// with the same put/url/ls interface as the S3 prefix fixture."""

    def __init__(self, memfs):
        self.fs, self.prefix = memfs.fs, memfs.prefix

    def url(self, name=""):
        return f"memory://{self.prefix}/{name}" if name else f"memory://{self.prefix}"

    def put(self, name, data):
        self.fs.pipe_file(f"{self.prefix}/{name}", data)
        return self.url(name)

    def get(self, name):
        return self.fs.cat_file(f"{self.prefix}/{name}")

    def ls(self):
        return sorted(p.rsplit("/", 1)[1] for p in self.fs.find(self.prefix))


@pytest.fixture(params=["s3", "memory"])
def remote(request):
    if request.param == "s3":
        return request.getfixturevalue("s3")
    return Mem(request.getfixturevalue("memfs"))


def test_globs_and_directories_resolve_remotely(remote):
    for name in ("b.tfrecord", "a.tfrecord", "c.tfrecord.gz", ".hidden.tfrecord", "a.tfrecord.index",
                 "sub/d.tfrecord"):
        remote.put(f"dir/{name}", framed([b"x"]))
    base = remote.url("dir")
    names = lambda paths: [p[len(base) + 1:] for p in paths]  # noqa: E731
    assert names(resolve_files(base)) == ["a.tfrecord", "b.tfrecord", "c.tfrecord.gz"]
    assert names(resolve_files(base + "/")) == ["a.tfrecord", "b.tfrecord", "c.tfrecord.gz"]
    assert names(resolve_files(base + "/*.tfrecord*")) == ["a.tfrecord", "b.tfrecord", "c.tfrecord.gz"]
    assert names(resolve_files(base + "/**/*.tfrecord")) == ["a.tfrecord", "b.tfrecord", "sub/d.tfrecord"]
    assert resolve_files([base + "/b.tfrecord", base + "/a.tfrecord"]) == [base + "/b.tfrecord",
                                                                                base + "/a.tfrecord"]
    assert list(tfl.TFRecordDataset(base)) == [b"x"] * 3
    with pytest.raises(TFRecordError, match="no TFRecord files found"):
        resolve_files(base + "/nothing-*.tfrecord")


def test_a_glob_in_a_missing_bucket_says_so(s3):
    """A glob or directory in a bucket that does not exist (a typo) found nothing and said
    'no TFRecord files found'; it names the missing bucket. One that exists still finds none."""
    for spec in ("s3://no-such-bucket-7f3a/d/*.tfrecord", "s3://no-such-bucket-7f3a/**"):
        with pytest.raises(FileNotFoundError, match="no such bucket") as info:
            resolve_files(spec)
        assert info.value.filename == spec
    with pytest.raises(TFRecordError, match="no TFRecord files found"):
        resolve_files(s3.url("nothing-*.tfrecord"))
    # read as a file, it said 'No such file or directory'
    url = "s3://no-such-bucket-7f3a/d/a.tfrecord"
    for call in (lambda: tfl.TFRecordReader(url), lambda: tfl.TFRecordFile(url), lambda: list(tfl.TFRecordDataset([url]))):
        with pytest.raises(FileNotFoundError, match="no such bucket") as info:
            call()
        assert info.value.filename == url


def test_an_s3a_glob_gives_s3a_urls(s3):
    """s3a:// (Hadoop's name, which s3fs takes too) globs and directories came back as s3://
    URLs; the files keep the scheme they were asked for, as a single file does."""
    for name in ("b.tfrecord", "a.tfrecord"):
        s3.put(f"d/{name}", framed([name.encode()]))
    base = "s3a://" + s3.url("d")[len("s3://"):]
    want = [base + "/a.tfrecord", base + "/b.tfrecord"]
    assert resolve_files(base + "/*.tfrecord") == resolve_files(base) == resolve_files(base + "/**") == want
    assert list(tfl.TFRecordDataset(base + "/*.tfrecord")) == [b"a.tfrecord", b"b.tfrecord"]
    assert resolve_files("simplecache::" + base + "/*.tfrecord") == ["simplecache::" + url for url in want]


def test_files_written_elsewhere_after_a_listing_are_seen(s3, s3_reads):
    """s3fs keeps the listings it made for the life of the process: a directory or glob
    resolved again missed the files another process wrote since and listed those it
    deleted, and a file written since was 'No such file' to TFRecordFile and size()."""
    import s3fs

    other = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)  # another process's
    for name in ("a", "sub/a"):
        s3.put(f"d/{name}.tfrecord", framed([name.encode()]))
    specs = ("d", "d/*.tfrecord", "d/*/*", "d/**", "d/b.tfrecord")
    for spec in specs:
        resolve_files(s3.url(spec))
    for name in ("b", "sub/b"):
        other.pipe_file(f"{s3.prefix}/d/{name}.tfrecord", framed([name.encode()]))
    other.rm_file(f"{s3.prefix}/d/a.tfrecord")
    found = [[u[len(s3.url("d")) + 1:] for u in resolve_files(s3.url(spec))] for spec in specs]
    assert found == [["b.tfrecord"], ["b.tfrecord"], ["sub/a.tfrecord", "sub/b.tfrecord"],
                     ["b.tfrecord", "sub/a.tfrecord", "sub/b.tfrecord"], ["b.tfrecord"]]
    url = s3.url("d/sub/b.tfrecord")
    assert tfl.TFRecordFile(url)[0] == b"sub/b" and tfs.size(url) > 0
    assert list(tfl.TFRecordDataset(s3.url("d/**"))) == [b"b", b"sub/a", b"sub/b"]
    other.pipe_file(f"{s3.prefix}/d/sub/b.tfrecord.index", b"")
    assert tfs.exists(url + ".index")


def test_s3_directory_markers_are_no_files(s3, capsys):
    """A folder made in the S3 console (or by Hadoop, rclone...) is a zero-byte "dir/" key:
    listed as a file, it made every read of the folder fail with "no such file", and an
    empty folder was no such file instead of one holding no TFRecord files."""
    s3.put("empty/", b"")
    with pytest.raises(TFRecordError, match="no TFRecord files found"):
        resolve_files(s3.url("empty/"))
    s3.put("dir/", b"")
    s3.put("dir/sub/", b"")
    url = s3.put("dir/a.tfrecord", framed([b"x"]))
    for spec in ("dir", "dir/", "dir/**"):
        assert resolve_files(s3.url(spec)) == [url]
    assert list(tfl.TFRecordDataset(s3.url("dir/"))) == [b"x"]
    assert cli.main(["count", s3.url("dir/")]) == 0
    assert capsys.readouterr().out == f"1\t{url}\n"


@pytest.mark.parametrize("where", ["local", "s3", "memory"])
def test_double_star_matches_any_depth_everywhere_and_skips_hidden(request, tmp_path, where):
    """``**`` matches any number of directories on local disk as on object stores (a local
    glob read it as ``*``, so data/**/*.tfrecord found only data/*/*.tfrecord there), and a
    file under a hidden directory is left out remotely as locally, unless the pattern names
    that directory."""
    names = ["top.tfrecord", "a/x.tfrecord", "a/x.tfrecord.index", "a/b/y.tfrecord", ".tmp/z.tfrecord",
             "a/.w.tfrecord"]
    if where == "local":
        for name in names:
            (tmp_path / "data" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "data" / name).write_bytes(framed([b"x"]))
        base = str(tmp_path / "data")
    else:
        store = request.getfixturevalue("s3") if where == "s3" else Mem(request.getfixturevalue("memfs"))
        for name in names:
            store.put(f"data/{name}", framed([b"x"]))
        base = resolve_files(store.url("data/top.tfrecord"))[0].rsplit("/", 1)[0]
    found = lambda pattern: [p[len(base) + 1:] for p in resolve_files(f"{base}/{pattern}")]  # noqa: E731
    assert found("**/*.tfrecord") == found("**") == ["a/b/y.tfrecord", "a/x.tfrecord", "top.tfrecord"]
    assert found("*/*.tfrecord") == ["a/x.tfrecord"]
    assert found("**/b/*") == ["a/b/y.tfrecord"]
    assert found("**.tfrecord") == found("*.tfrecord") == ["top.tfrecord"]  # "**" inside a name is "*"
    assert found("a/***") == ["a/x.tfrecord"]
    assert found(".tmp/*") == found(".*/*.tfrecord") == [".tmp/z.tfrecord"]
    assert len(list(tfl.TFRecordDataset(f"{base}/**/*.tfrecord"))) == 3


def test_an_object_named_like_a_glob_is_itself(remote, capsys):
    """A URL that names an existing object is that object, glob characters and all, in the
    library and the CLI alike; a pattern that names none still globs."""
    literal = remote.put("d/a[1].tfrecord", framed([b"literal"]))
    remote.put("d/a1.tfrecord", framed([b"match"]))
    assert resolve_files(literal) == [literal]
    assert list(tfl.TFRecordDataset(literal)) == [b"literal"]
    assert len(tfl.IndexedDataset(literal)) == 1
    assert resolve_files(remote.url("d/a[0-9].tfrecord")) == [remote.url("d/a1.tfrecord")]
    assert cli.main(["count", literal]) == 0
    assert capsys.readouterr().out == f"1\t{literal}\n"


def test_listed_urls_keep_the_form_they_were_asked_in(memfs, capsys):
    """memory://p/* listed memory:///p/a.tfrecord: the same file, but no longer under the
    prefix the caller gave (a startswith or a relative name broke, the CLI printed another
    path). Each file keeps the form of the URL it was listed from."""
    for name in ("a.tfrecord", "sub/b.tfrecord"):
        memfs.fs.pipe_file(f"{memfs.prefix}/d/{name}", framed([name.encode()]))
    for base in ("memory://" + memfs.prefix.lstrip("/"), "memory://" + memfs.prefix):
        want = [f"{base}/d/a.tfrecord", f"{base}/d/sub/b.tfrecord"]
        assert resolve_files(f"{base}/d/*.tfrecord") == resolve_files(f"{base}/d") == want[:1]
        assert resolve_files(f"{base}/d/") == want[:1] and resolve_files(f"{base}/d/**") == want
        assert resolve_files(f"{base}/*/sub/*") == want[1:]
        assert list(tfl.TFRecordDataset(f"{base}/d/**")) == [b"a.tfrecord", b"sub/b.tfrecord"]
    assert cli.main(["count", base.replace(":///", "://") + "/d/*"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"1\tmemory://{memfs.prefix.lstrip('/')}/d/a.tfrecord"


def test_a_caret_bracket_negates_remotely_as_locally(remote):
    """[^a] matches any character but 'a' on remote stores as on local disk (test_files)."""
    for name in ("a.tfrecord", "b.tfrecord", "^.tfrecord", "s/a.tfrecord"):
        remote.put(f"d/{name}", framed([name.encode()]))
    names = lambda spec: [p.rsplit("/d/", 1)[1] for p in resolve_files(remote.url(spec))]  # noqa: E731
    assert names("d/[^a].tfrecord") == names("d/[!a].tfrecord") == ["^.tfrecord", "b.tfrecord"]
    assert names("d/**/[^b].tfrecord") == ["^.tfrecord", "a.tfrecord", "s/a.tfrecord"]
    assert names("d/[a^].tfrecord") == ["^.tfrecord", "a.tfrecord"]


def test_a_chained_glob_keeps_its_chain(memfs, tmp_path):
    """The files of 'simplecache::memory://.../*.tfrecord' are read through simplecache too
    (and with its storage_options), not as bare memory:// URLs."""
    for name in ("a.tfrecord", "b.tfrecord"):
        memfs.fs.pipe_file(f"{memfs.prefix}/d/{name}", framed([name.encode()]))
    cache = {"simplecache": {"cache_storage": str(tmp_path / "cache")}}
    for spec in ("simplecache::" + memfs.url("d/*.tfrecord"), "simplecache::" + memfs.url("d")):
        paths = resolve_files(spec, cache)
        assert [p.rsplit("/", 1)[1] for p in paths] == ["a.tfrecord", "b.tfrecord"]
        assert all(p.startswith("simplecache::memory://") for p in paths)
    assert list(tfl.TFRecordDataset(spec, storage_options=cache)) == [b"a.tfrecord", b"b.tfrecord"]
    assert len(os.listdir(tmp_path / "cache")) >= 2  # read through the cache


def test_a_glob_inside_an_archive_keeps_the_archive(s3, backend):
    """zip://*.tfrecord::s3://b/x.zip expands to files that still name the archive (they were
    bare zip://a.tfrecord, read from the working directory), and a file's sidecar is looked
    for beside it inside the archive, not at the archive's URL plus ".index"."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.tfrecord", framed([b"a0", b"a1"]))
        z.writestr("sub/b.tfrecord", framed([b"b0"]))
        z.writestr("sub/b.tfrecord.index", "0 99\n")  # stale
    tail = "::" + s3.put("x.zip", archive.getvalue())
    assert resolve_files("zip://**/*.tfrecord" + tail) == ["zip://a.tfrecord" + tail, "zip://sub/b.tfrecord" + tail]
    assert list(tfl.TFRecordDataset("zip://*.tfrecord" + tail)) == [b"a0", b"a1"]
    assert tfl.TFRecordFile("zip://a.tfrecord" + tail)[1] == b"a1"
    assert count_records("zip://a.tfrecord" + tail) == 2
    with pytest.raises(TFRecordError, match="stale") as info:
        tfl.TFRecordFile("zip://sub/b.tfrecord" + tail)
    assert info.value.path == "zip://sub/b.tfrecord.index" + tail
    assert s3.ls() == ["x.zip"]


def test_a_file_inside_a_tar_archive_is_counted_and_cannot_be_written(s3):
    """tar:// is read-only, and says so with a ValueError: count_records, which keeps its scan
    as a sidecar where it can, failed with it, and a writer raised it bare."""
    import errno
    import tarfile

    archive, data = io.BytesIO(), framed([b"a", b"bb"])
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        member = tarfile.TarInfo("d/b.tfrecord")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    url = "tar://d/b.tfrecord::" + s3.put("x.tar.gz", archive.getvalue())
    assert count_records(url) == 2 and tfl.TFRecordFile(url)[1] == b"bb"
    with pytest.raises(OSError, match=r"tar:// URLs cannot be written \(Read-only") as info:
        tfl.TFRecordWriter("tar://d/c.tfrecord::" + s3.url("x.tar.gz"))
    assert info.value.errno == errno.EROFS
    assert s3.ls() == ["x.tar.gz"]


@pytest.mark.parametrize("shards", [3, 8])
def test_dataset_shards_read_every_record_exactly_once(remote, backend, shards):
    put_shards(remote, 5, 40, compress_every=2)
    seen = []
    for i in range(shards):
        ds = tfl.TFRecordDataset(remote.url("data/*.tfrecord"), SPEC, batch_size=16, num_threads=2,
                                 shard=(i, shards), shuffle_files=True, seed=i)
        seen += ids(ds)
    assert sorted(seen) == list(range(200))


def test_dataset_max_open_files_bounds_open_remote_handles(s3, s3_reads, monkeypatch):
    """At most max_open_files S3 handles are open at once, and none is left open."""
    from tfrecord_lite import _pipeline, fs as tfs

    # Read pieces of 64 KiB, so that each file takes several and stays open a while.
    monkeypatch.setattr(_pipeline, "_PIECE_BYTES_PER_THREAD", 0)
    big = np.zeros(30_000, np.uint8)
    for f in range(8):
        s3.put(f"data/part-{f:03d}.tfrecord", framed(
            [tfl.encode_example({"id": f * 12 + j, "v": np.zeros(3, np.float32), "pad": big.tobytes()})
             for j in range(12)]))
    live, peak = set(), [0]
    real_open = tfs.open_input

    def counting_open(path, storage_options=None):
        f = real_open(path, storage_options)
        assert isinstance(f, tfs.SignedStream) == (s3_reads == "signed")
        live.add(id(f))
        peak[0] = max(peak[0], len(live))
        real_close = f.close

        def close():
            live.discard(id(f))
            real_close()

        f.close = close
        return f

    monkeypatch.setattr(tfs, "open_input", counting_open)
    ds = tfl.TFRecordDataset(s3.url("data"), SPEC, batch_size=7, num_threads=2, max_open_files=3,
                             cycle_length=3)
    assert ids(ds) == list(range(96))
    assert peak[0] == 3 and not live
    it = iter(tfl.TFRecordDataset(s3.url("data"), num_threads=2, max_open_files=2))
    next(it)
    it.close()  # leaving early closes them too
    assert peak[0] == 3 and not live


def test_dataset_corruption_names_the_url(s3):
    data = bytearray(framed([example(i) for i in range(10)]))
    data[-3] ^= 1
    url = s3.put("bad.tfrecord", bytes(data))
    with pytest.raises(CorruptRecordError) as err:
        list(tfl.TFRecordDataset([url], SPEC, batch_size=4, num_threads=2))
    assert err.value.path == url and err.value.index == 9 and url in str(err.value)


def test_to_numpy_and_to_npy_from_remote(remote, tmp_path):
    put_shards(remote, 3, 25)
    arrays = tfl.to_numpy(remote.url("data/part-*.tfrecord"), SPEC, batch_size=10)
    assert arrays["id"].tolist() == list(range(75))
    out = tfl.to_npy(remote.url("data"), SPEC, str(tmp_path / "npy"), batch_size=10, progress=False)
    assert out["v"].shape == (75, 3) and out["v"][:, 0].tolist() == list(range(75))


def test_build_index_and_random_access(remote, backend):
    records = [example(i) for i in range(100)]
    url = remote.put("ra.tfrecord", framed(records))
    assert tfl.build_index(url) == url + ".index"
    assert remote.get("ra.tfrecord.index").split(b"\n")[1] == f"{len(framed(records[:1]))} {len(framed(records[1:2]))}".encode()
    f = tfl.TFRecordFile(url)
    assert len(f) == 100 and f[0] == records[0] and f[-1] == records[-1]
    assert f[10:20] == records[10:20] and f[::33] == records[::33]
    import pickle

    assert pickle.loads(pickle.dumps(f))[5] == records[5]
    remote.put("ra2.tfrecord", framed(records[:10]))  # no sidecar: scanned
    ds = tfl.IndexedDataset([url, remote.url("ra2.tfrecord")], SPEC)
    assert len(ds) == 110
    assert ds[105]["id"] == 5 and ds[[3, 99, 100]]["id"].tolist() == [3, 99, 0]


def test_a_count_is_not_kept_past_a_same_size_rewrite(remote):
    """count_records keeps a count per version of a file: an object rewritten to the same
    size (a new ETag on S3, a new creation time on memory://) is counted again."""
    from tfrecord_lite.index import count_records

    one, two = framed([b"x" * 16]), framed([b"", b""])
    assert len(one) == len(two)
    url = remote.put("c.tfrecord", one)
    assert count_records(url) == 1
    remote.put("c.tfrecord", two)
    assert count_records(url) == 2
    assert list(tfl.TFRecordDataset(url)) == [b"", b""]


def test_random_access_detects_corruption_and_stale_index(s3):
    records = [example(i) for i in range(20)]
    data = bytearray(framed(records))
    url = s3.put("x.tfrecord", bytes(data))
    tfl.build_index(url)
    data[54 + 20] ^= 1  # inside record 1's data (record 0's frame is 54 bytes)
    s3.put("x.tfrecord", bytes(data))
    f = tfl.TFRecordFile(url)
    assert f[0] == records[0]
    with pytest.raises(CorruptRecordError) as err:
        f[1]
    assert err.value.path == url and err.value.index == 1 and url in str(err.value)
    s3.put("x.tfrecord", bytes(data[:100]))
    with pytest.raises(TFRecordError, match="The index is stale"):
        tfl.TFRecordFile(url)


def test_random_reads_are_ranged_requests(s3, caplog):
    """Each random read is one ranged GET (206, as the server logs it), never the whole file."""
    records = [os.urandom(1000) for _ in range(3000)]
    url = s3.put("big.tfrecord", framed(records))
    tfl.build_index(url)
    f = tfl.TFRecordFile(url)
    caplog.clear()
    with caplog.at_level("INFO", logger="werkzeug"):
        assert f[1234] == records[1234] and f[10:15] == records[10:15]
    gets = [r.getMessage() for r in caplog.records if "GET /" in r.getMessage()]
    assert len(gets) == 2 and all("big.tfrecord " in g and g.endswith(" 206 -") for g in gets)


def test_merge_and_split_between_s3_and_local(s3, tmp_path, backend):
    a = [example(i) for i in range(30)]
    b = [example(i) for i in range(30, 45)]
    ua = s3.put("a.tfrecord", framed(a))
    ub = s3.put("b.tfrecord.gz", gzip.compress(framed(b)))
    local = str(tmp_path / "c.tfrecord")
    with tfl.TFRecordWriter(local) as w:
        w.write(example(99))
    # S3 + local -> local, verbatim and verified
    info = tfl.merge([ua, ub, local], str(tmp_path / "all.tfrecord"), verify=True)
    assert info.records == 46 and list(tfl.TFRecordReader(info.path)) == a + b + [example(99)]
    # S3 + local -> S3 (the S3 input streamed, the local one walked and copied raw)
    info = tfl.merge([ua, local], s3.url("out/all.tfrecord"))
    assert list(tfl.TFRecordReader(s3.url("out/all.tfrecord"))) == a + [example(99)]
    info = tfl.merge([ub, ua], s3.url("out/all.tfrecord.gz"), compression="gzip", index=False)
    assert list(tfl.TFRecordReader(info.path)) == b + a
    # split S3 -> S3 shards, and S3 -> local shards
    shards = tfl.split(ua, 4, index=True)
    assert [s.path for s in shards] == [s3.url(f"a-{i:05d}-of-00004.tfrecord") for i in range(4)]
    assert [s.records for s in shards] == [8, 8, 7, 7]
    assert [r for s in shards for r in tfl.TFRecordReader(s.path)] == a
    assert tfl.TFRecordFile(shards[2].path)[0] == a[16]
    shards = tfl.split(ub, 3, str(tmp_path / "b"), compression="zlib")
    assert [r for s in shards for r in tfl.TFRecordReader(s.path)] == b
    shards = tfl.split(local, 2, s3.url("from-local/c"))
    assert [s.records for s in shards] == [1, 0]


def test_merge_corrupt_input_names_url_and_writes_nothing(s3, tmp_path):
    data = bytearray(framed([example(i) for i in range(10)]))
    data[30] ^= 1
    url = s3.put("bad.tfrecord", bytes(data))
    with pytest.raises(CorruptRecordError) as err:
        tfl.merge([url], s3.url("out.tfrecord"), verify=True)
    assert err.value.path == url and err.value.index == 0
    assert s3.ls() == ["bad.tfrecord"] and s3.multipart_uploads() == []


def test_memory_merge_split(memfs):
    m = Mem(memfs)
    a = [example(i) for i in range(12)]
    url = m.put("a.tfrecord", framed(a))
    shards = tfl.split(url, 3, compression="gzip")
    assert tfl.merge([s.path for s in shards], m.url("back.tfrecord")).path == m.url("back.tfrecord")
    assert m.get("back.tfrecord") == framed(a)
    assert not [n for n in m.ls() if n.startswith(".")]


def test_sharded_writer_and_write_parallel_to_remote(remote):
    with tfl.ShardedWriter(remote.url("fixed/train"), num_shards=3, index=True) as w:
        w.write_many([example(i) for i in range(30)])
    assert [s.records for s in w.shards] == [10, 10, 10]
    with tfl.ShardedWriter(remote.url("roll/log"), max_records_per_shard=4, compression="gzip") as w:
        for i in range(10):
            w.write(example(i))
    assert [s.path for s in w.shards] == [remote.url(f"roll/log-{i:05d}-of-00003.tfrecord") for i in range(3)]
    assert ids(tfl.TFRecordDataset(remote.url("roll"), SPEC, batch_size=3)) == list(range(10))
    shards = tfl.write_parallel(range(50), example, remote.url("par/data"), num_shards=4, num_workers=2,
                                chunk_size=5)
    assert ids(tfl.TFRecordDataset([s.path for s in shards], SPEC, batch_size=8)) == list(range(50))
    names = remote.ls()
    assert names == sorted([f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
                           + [f"train-{i:05d}-of-00003.tfrecord.index" for i in range(3)]
                           + [f"log-{i:05d}-of-00003.tfrecord" for i in range(3)]
                           + [f"data-{i:05d}-of-00004.tfrecord" for i in range(4)])
    assert tfl.TFRecordFile(remote.url("fixed/train-00001-of-00003.tfrecord"))[0] == example(1)


def test_failed_sharded_writes_leave_nothing_remote(remote):
    with pytest.raises(ZeroDivisionError):
        with tfl.ShardedWriter(remote.url("w/train"), max_records_per_shard=2) as w:
            for i in range(7):
                w.write(example(i))
            1 / 0

    def bad(i):
        if i == 37:
            raise ValueError("no")
        return example(i)

    with pytest.raises(EncodeError, match="item 37"):
        tfl.write_parallel(range(50), bad, remote.url("p/data"), num_shards=3, num_workers=2, chunk_size=4)
    assert remote.ls() == []
    if hasattr(remote, "multipart_uploads"):
        assert remote.multipart_uploads() == []


def _failing_to_place(remote, monkeypatch, name):
    """The step that puts the object `name` under its final name fails once: completing its
    upload (S3, fixed names), or its copy or move from a hidden name (rolled shards, memory)."""
    import fsspec.implementations.memory
    import posixpath

    failed = []

    def fail(destination):
        if posixpath.basename(destination) == name and not failed:
            failed.append(destination)
            raise OSError(5, "the store failed", destination)

    def wrap(cls, method, where):
        original = getattr(cls, method)

        def failing(*args, **kwargs):
            if isinstance(cls, type):  # a method of every instance
                self, args = args[0], args[1:]
                fail(where(self, args))
                return original(self, *args, **kwargs)
            fail(where(cls, args))
            return original(*args, **kwargs)
        monkeypatch.setattr(cls, method, failing)

    if hasattr(remote, "multipart_uploads"):
        import s3fs

        wrap(s3fs.core.S3File, "commit", lambda f, args: f.path)
        store = tfs.filesystem(remote.url())[0]  # the writers' (cached) instance: its sync methods are its own
        wrap(store, "cp_file", lambda fs, args: args[1])
    else:
        wrap(fsspec.implementations.memory.MemoryFileSystem, "mv", lambda fs, args: args[1])
    return failed


@pytest.mark.parametrize("rolling", [False, True])
def test_a_failed_group_commit_puts_back_the_objects_it_replaced(remote, monkeypatch, rolling):
    def write(first):
        if rolling:
            w = tfl.ShardedWriter(remote.url("d/x"), max_records_per_shard=2, index=True)
        else:
            w = tfl.ShardedWriter(remote.url("d/x"), num_shards=3, index=True)
        with w:
            w.write_many([example(first + i) for i in range(6)])
        return w

    old = write(0)
    before = {n: remote.get(f"d/{n}") for n in remote.ls()}
    assert len(before) == 6
    failed = _failing_to_place(remote, monkeypatch, "x-00001-of-00003.tfrecord")
    with pytest.raises(OSError, match="the store failed"):
        write(100)
    assert failed
    assert remote.ls() == sorted(before)  # no hidden copy, no .partial object left
    assert {n: remote.get(f"d/{n}") for n in remote.ls()} == before
    assert ids(tfl.TFRecordDataset([s.path for s in old.shards], SPEC, batch_size=6)) == list(range(6))
    if hasattr(remote, "multipart_uploads"):
        assert remote.multipart_uploads() == []


@pytest.mark.parametrize("step", ["copy", "delete"])
def test_a_rolled_shard_that_fails_its_move_leaves_no_object(s3, monkeypatch, step):
    # On S3 a rolled shard is completed under a hidden name, then copied to -of-N and the
    # hidden one deleted: a failure of either step publishes nothing and leaves nothing.
    store = tfs.filesystem(s3.url())[0]  # the writers' (cached) instance: its sync methods are its own
    failed = []

    def failing(method, which):
        original = getattr(store, method)

        def call(path, *args, **kwargs):
            if not failed and any(p.endswith(".x-00001.tfrecord.partial") for p in which(path, args)):
                failed.append(path)
                raise PermissionError(13, "Access Denied", path)
            return original(path, *args, **kwargs)
        monkeypatch.setattr(store, method, call)

    for method in ("cp_file", "copy") if step == "copy" else ("rm_file", "rm"):
        failing(method, lambda path, args: [path] if isinstance(path, str) else path)
    with pytest.raises(PermissionError):
        with tfl.ShardedWriter(s3.url("x"), max_records_per_shard=1) as w:
            w.write_many([b"a", b"b", b"c"])
    assert failed and s3.ls() == [] and s3.multipart_uploads() == []


def test_cli_with_storage_options(s3, monkeypatch, capsys, tmp_path):
    import s3fs

    put_shards(s3, 2, 10)
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    s3fs.S3FileSystem.clear_instance_cache()
    opts = ["--storage-option", f"client_kwargs.endpoint_url={s3.server.endpoint}",
            "--storage-option", "client_kwargs.region_name=us-east-1",
            "--storage-option", "key=testing", "--storage-option", "secret=testing"]
    a, b = s3.url("data/part-000.tfrecord"), s3.url("data/part-001.tfrecord")
    assert cli.main(["count", a, b, *opts]) == 0
    assert capsys.readouterr().out.splitlines() == [f"10\t{a}", f"10\t{b}", "20\ttotal"]
    assert cli.main(["merge", a, b, "-o", s3.url("m.tfrecord.gz"), "--compression", "gzip", *opts]) == 0
    assert cli.main(["verify", s3.url("m.tfrecord.gz"), *opts]) == 0
    assert cli.main(["index", a, *opts]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"10\t{a}.index"
    assert cli.main(["split", s3.url("m.tfrecord.gz"), "-n", "2", "--prefix", str(tmp_path / "s"), *opts]) == 0
    assert cli.main(["head", a, "-n", "1", *opts]) == 0
    assert "record 0" in capsys.readouterr().out
    assert [r for i in range(2) for r in tfl.TFRecordReader(str(tmp_path / f"s-{i:05d}-of-00002.tfrecord"))] \
        == [example(i) for i in range(20)]
    assert cli.main(["count", s3.url("nope.tfrecord"), *opts]) == 2
    assert "nope.tfrecord: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["count", a, "--storage-option", "novalue"])


def test_cli_reads_fsspec_configuration_from_the_environment(s3, tmp_path):
    """FSSPEC_S3 (fsspec's own environment configuration) alone reaches the server."""
    import json
    import subprocess
    import sys

    url = s3.put("env.tfrecord", framed([example(i) for i in range(7)]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["FSSPEC_S3"] = json.dumps(s3.storage_options)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-m", "tfrecord_lite", "count", url], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"7\t{url}\n"
    del env["FSSPEC_S3"]
    env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # nothing listens there: the setting mattered
    env["AWS_MAX_ATTEMPTS"] = "1"
    out = subprocess.run([sys.executable, "-m", "tfrecord_lite", "count", url], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0


def test_a_missing_bucket_names_the_url(s3, tmp_path, capsys):
    """Writing into a bucket that does not exist raises FileNotFoundError naming the URL and
    saying to create the bucket, from a writer, write_parallel, merge and the CLI."""
    src = str(tmp_path / "in.tfrecord")
    with tfl.TFRecordWriter(src) as w:
        w.write_many([example(i) for i in range(3)])
    url = "s3://no-such-bucket-for-tests/d/x.tfrecord"

    def write(n):
        with tfl.TFRecordWriter(url, index=True) as w:
            w.write_many([os.urandom(1 << 20) for _ in range(n)])  # 40: parts go up while writing

    calls = {"writer": lambda: write(1), "writer, large": lambda: write(40), "merge": lambda: tfl.merge([src], url),
             "write_parallel": lambda: tfl.write_parallel(range(3), lambda i: b"x", url[:-9], num_shards=1)}
    for what, call in calls.items():
        with pytest.raises(FileNotFoundError, match="no such bucket: create the bucket") as info:
            call()
        assert info.value.filename.startswith("s3://no-such-bucket-for-tests/d/"), what
    assert cli.main(["merge", src, "-o", url]) == 2
    assert capsys.readouterr().err == f"tfrecord-lite merge: {url}: no such bucket: create the bucket, or check " \
                                      "its name in the URL\n"


def test_a_refusal_of_the_object_store_names_the_url(s3, monkeypatch, capsys):
    """The store's AccessDenied (s3fs: PermissionError('Access Denied'), no file named) is a
    PermissionError naming the URL and saying what to check, from every path-taking API."""
    from botocore.exceptions import ClientError

    url = s3.put("d/a.tfrecord", framed([b"a"]))
    store = tfs.filesystem(url)[0]  # the (cached) instance the library uses

    async def denied(method, *args, **kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, method)
    monkeypatch.setattr(store, "_call_s3", denied)
    monkeypatch.setattr(tfs, "_signs_urls", lambda fs: False)  # moto grants presigned GETs
    out = s3.url("d/b.tfrecord")
    calls = {url: [lambda: list(tfl.TFRecordReader(url)), lambda: tfl.TFRecordFile(url)[0],
                   lambda: tfl.build_index(url), lambda: list(tfl.TFRecordDataset(url))],
             s3.url("d/*.tfrecord"): [lambda: list(tfl.TFRecordDataset(s3.url("d/*.tfrecord")))],
             s3.url("d"): [lambda: list(tfl.TFRecordDataset(s3.url("d")))],
             out: [lambda: tfl.TFRecordWriter(out).close(), lambda: tfl.TFRecordWriter(out, atomic=False).close()]}
    for name, group in calls.items():
        for call in group:
            with pytest.raises(PermissionError, match=r"the object store denied access \(Access Denied\); check "
                               "that the credentials") as info:
                call()
            assert info.value.filename in (name, name + ".index")  # random access reads the sidecar first
    assert cli.main(["count", url]) == 1
    assert capsys.readouterr().err.startswith(f"tfrecord-lite count: {url}: the object store denied access")


def test_a_refusal_while_reading_blocks_names_the_url(s3, monkeypatch):
    """A refusal after the file opened, of a ranged block's GET (credentials expired or
    revoked mid-read), is the same named PermissionError, not s3fs's bare one."""
    from botocore.exceptions import ClientError

    url = s3.put("d/a.tfrecord", framed([b"a"] * 10))
    store = tfs.filesystem(url)[0]
    monkeypatch.setattr(tfs, "_signs_urls", lambda fs: False)

    async def denied(method, *args, **kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, method)
    for read in (list, lambda r: list(r.record_spans())):
        with tfl.TFRecordReader(url) as reader, monkeypatch.context() as m:
            m.setattr(store, "_call_s3", denied)
            with pytest.raises(PermissionError, match=r"denied access \(Access Denied\); check that the "
                               "credentials") as info:
                read(reader)
        assert info.value.filename == url


class _HttpError(Exception):
    """gcsfs's HttpError: what it raises for a 401 (no or bad credentials)."""

    def __init__(self, error):
        super().__init__(error["message"])
        self.code = error["code"]


@pytest.mark.parametrize("refusal", [
    OSError("Forbidden: b/d/a.tfrecord\nuser lacks storage.objects.get"),  # gcsfs's 403
    _HttpError({"code": 401, "message": "Anonymous caller does not have storage.objects.get access"}),
])
def test_other_stores_refusals_name_the_url_too(memfs, monkeypatch, refusal):
    import fsspec.implementations.memory

    url = memfs.url("d/a.tfrecord")
    memfs.fs.pipe_file(f"{memfs.prefix}/d/a.tfrecord", framed([b"a"]))

    def refuse(*args, **kwargs):
        raise refusal
    for method in ("_open", "cat_file"):
        monkeypatch.setattr(fsspec.implementations.memory.MemoryFileSystem, method, refuse)
    for call in (lambda: list(tfl.TFRecordReader(url)), lambda: tfl.TFRecordFile(url)[0]):
        with pytest.raises(PermissionError, match="the object store denied access") as info:
            call()
        assert info.value.filename in (url, url + ".index")
        assert str(refusal).splitlines()[0] in str(info.value)


_NO_CREDENTIALS = """
import sys
import tfrecord_lite as tfl
from tfrecord_lite.cli import main
url = sys.argv[1]
def write():
    with tfl.TFRecordWriter(url + "-out") as w:
        w.write(b"a")
pattern = url.rsplit("/", 1)[0] + "/*.tfrecord"  # listing a glob needs credentials too
for call in (lambda: list(tfl.TFRecordReader(url)), write, lambda: tfl.merge([url], sys.argv[2]),
             lambda: tfl.TFRecordDataset(pattern)):
    try:
        call()
    except tfl.TFRecordError as exc:
        print(type(exc).__name__, exc.path, "|", exc)
sys.exit(main(["count", url]))
"""


def test_missing_credentials_name_the_url_and_say_where_to_set_them(s3, s3_server, tmp_path):
    url = s3.put("x.tfrecord", framed([b"a"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3_server.endpoint, AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _NO_CREDENTIALS, url, str(tmp_path / "m.tfrecord")], env=env,
                         capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    pattern = url.rsplit("/", 1)[0] + "/*.tfrecord"
    assert [line.split(" |")[0] for line in lines] == [f"TFRecordError {url}", f"TFRecordError {url}-out",
                                                       f"TFRecordError {url}", f"TFRecordError {pattern}"], \
        out.stdout + out.stderr
    for line in lines:
        assert "found no credentials" in line and "AWS_ACCESS_KEY_ID" in line and "storage_options" in line
    assert out.returncode == 1
    assert out.stderr.startswith(f"tfrecord-lite count: {url}: found no credentials") and out.stderr.count("\n") == 1
    assert not (tmp_path / "m.tfrecord").exists()
