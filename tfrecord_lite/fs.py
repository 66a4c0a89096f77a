"""Paths: telling local paths from fsspec URLs, and everything tfrecord_lite does with a
remote path. This is the only module that imports fsspec, and only when a URL is used.

A path is remote when it is a string ``scheme://...`` (``s3://``, ``gs://``, ``memory://``,
chained ``simplecache::s3://``...), except ``file://`` and ``local://`` (fsspec's two names
for the local filesystem), which map to the local path so that
local files keep their fast paths (mmap, pread, copy_file_range). ``storage_options`` go to
the fsspec filesystem; fsspec's own configuration (``FSSPEC_S3_...`` environment variables,
its config files) and the cloud SDKs' (``AWS_ENDPOINT_URL``, credentials) apply as usual.

What this module owns for remote paths:
- inputs: never a request per record. An S3 object streams through one presigned GET
  (``_streams.SignedStream``), its bytes received straight into the reader's buffer without
  the GIL; other filesystems (and S3 settings a presigned URL cannot carry) read through
  fsspec in large ranged blocks (``BLOCK_BYTES``), the next fetched in the background (over
  HTTP, through one plain GET once the server shows it ignores Range);
- resolution of globs and directories (sorted; ``.index`` sidecars and hidden names left out);
- sizes, existence, small whole reads (sidecars) and ranged reads (random access);
- atomic outputs: an object appears under its final name only when complete. S3 and GCS
  write a multipart upload that is completed at commit and aborted on error (a killed
  process leaves an incomplete upload, never an object); other filesystems write a hidden
  temporary name in the same directory and move it into place at commit.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import posixpath
import re
import stat
import urllib.parse
import uuid

from ._streams import SignedStream, _changed, _NotSigned, _RangeFallback
from .errors import InvalidArgumentError, TFRecordError

__all__ = ["is_url", "pinned", "beside", "local_path", "filesystem", "open_input", "open_output", "expand", "size",
           "fingerprint", "exists", "remove", "read_bytes", "read_range", "SignedStream", "BLOCK_BYTES", "WRITE_BLOCK_BYTES",
           "GLOB_CHARS", "move", "make_dirs"]

BLOCK_BYTES = 16 << 20  # one ranged GET per block; an open input holds up to three blocks
WRITE_BLOCK_BYTES = 16 << 20  # one upload part per block (S3 needs >= 5 MiB)
_READ_AHEAD_BLOCKS = 2  # blocks kept per open input (fsspec re-fetches with fewer); one more in flight
_SIGNED_PROTOCOLS = frozenset({"s3", "s3a"})  # presigning is local computation there
_LOCAL_SCHEMES = ("file://", "local://")  # fsspec's names for the local filesystem
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")
# Filesystems whose files write a multipart upload completed only by commit().
_TRANSACTIONAL = frozenset({"s3", "s3a", "gs", "gcs"})
# fs.info keys that change when an object is rewritten: S3 and HTTP, GCS, Azure, local
# and memory:// (which keeps a creation time).
_VERSION_KEYS = ("ETag", "etag", "generation", "LastModified", "last_modified", "updated", "mtime", "created")
GLOB_CHARS = frozenset("*?[")  # a path with one of these is a pattern
_HINT_CREDENTIALS = ("Set credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), "
                      "in ~/.aws/credentials, or in storage_options (--storage-option for the CLI): key=... "
                      "and secret=..., or anon=true for a public bucket")
_HINT_INSTALL = ("install the cloud extra: pip install 'tfrecordkit[cloud]' (or '.[cloud]' from a checkout): "
                 "fsspec, s3fs, gcsfs")


def is_url(path) -> bool:
    """True for an fsspec URL other than ``file://`` and ``local://`` (local paths)."""
    return isinstance(path, str) and _URL.match(path) is not None and not path.startswith(_LOCAL_SCHEMES)


def pinned(path) -> bool:
    """True for a URL that names one fixed object rather than a path: an HTTP(S) URL with a
    query string (a presigned URL, whose signature covers that object only) or a fragment,
    an S3 URL with ``?versionId=`` or a GCS URL with ``#<generation>`` or ``?generation=``
    (one version of an object, as s3fs and gcsfs read them). Nothing is named after it by
    appending to it (no sidecar: ``k?versionId=v.index`` is version ``v.index`` of ``k``), no
    glob is expanded in it, and it cannot be written (the store writes a new version of the
    bare key)."""
    url = _links(path)[1] if isinstance(path, str) else ""
    scheme, _, rest = url.partition("://")
    # Split as urlsplit does, which refuses a bracketed name that is no IPv6 address
    # (memory://d[12]/x, a glob).
    before_fragment, _, fragment = rest.partition("#")
    query = before_fragment.partition("?")[2]
    if scheme in ("http", "https"):  # a fragment is never sent: "a#x.index" would GET a itself
        return bool(query or fragment)
    if scheme in ("s3", "s3a"):
        return "?versionId=" in rest
    if scheme in ("gs", "gcs"):
        return bool(fragment) or "generation" in urllib.parse.parse_qs(query)
    return False


def _links(url: str) -> tuple[str, str, str]:
    """(before, link, after) of a URL, link being the link of its chain that holds the path
    (its first with "://"): ``zip://a.tfrecord`` of ``zip://a.tfrecord::s3://b/x.zip``,
    ``s3://b/k`` of ``simplecache::s3://b/k``. before and after keep their "::"."""
    links = url.split("::")
    for i, link in enumerate(links):
        if "://" in link:
            return "".join(x + "::" for x in links[:i]), link, "".join("::" + x for x in links[i + 1:])
    return "", url, ""


def beside(url: str, suffix: str) -> str:
    """The URL of the file named like url's plus suffix (its sidecar): suffix goes on the
    link that holds the path, not on a chain's last link (``zip://a.tfrecord.index::s3://b/x.zip``,
    not ``zip://a.tfrecord::s3://b/x.zip.index``, an archive that does not exist)."""
    before, link, after = _links(url)
    return before + link + suffix + after


def _bucket_only(url: str) -> bool:
    """Whether url names an S3 or GCS bucket (no key): a directory, not a file."""
    scheme, _, rest = _links(url)[1].partition("://")
    return scheme in ("s3", "s3a", "gs", "gcs") and not rest.strip("/").partition("/")[2]


def _not_a_file(url, what="bucket") -> IsADirectoryError:
    return IsADirectoryError(errno.EISDIR, f"names a {what}, not a file: give a file in it, such as "
                             f"{url.rstrip('/')}/data.tfrecord", url)


def _missing(fs, p, url) -> OSError:
    """The error for a file that is not there: a directory (a key prefix on an object
    store, which has no such object) says so rather than that nothing is there."""
    try:
        with _naming(url):
            if fs.isdir(p):
                return _not_a_file(url, "directory")
            if _in_missing_bucket(fs, p):
                return _no_bucket(url)
    except Exception:  # the probe failed too: report what the read found
        pass
    return _not_found(url)


def _no_bucket(url) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, "no such bucket, or none these credentials may reach: check the "
                             "bucket's name in the URL", url)


def _check_writable(url, name=None) -> None:
    """Refuse to write or delete through a URL that names a bucket, or a pinned one (the
    store would act on the bare name's current version); errors name ``name`` (default url)."""
    if _bucket_only(url):
        raise _not_a_file(name or url)
    if pinned(url):
        raise InvalidArgumentError("names one version of an object (or a signed URL), which cannot be "
                                   "written: the store would write a new version of the bare name",
                                   path=name or url, hint="write to the URL without its version (?versionId=, "
                                   "#generation) or query")


def local_path(path) -> str:
    """A local path as a string: ``os.fspath``, with a ``file://`` or ``local://`` prefix removed."""
    path = os.fspath(path)
    if isinstance(path, str) and path.startswith(_LOCAL_SCHEMES):
        scheme, _, path = path.partition("://")
        if scheme == "file" and path.startswith("localhost/"):
            path = path[len("localhost"):]
    return path


def filesystem(url: str, storage_options=None):
    """(fsspec filesystem, path within it) for a URL."""
    try:
        import fsspec.core
    except ImportError as exc:
        raise TFRecordError(f"{url} needs fsspec ({exc})", path=url, hint=_HINT_INSTALL) from None
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:  # the scheme's implementation (s3fs, gcsfs...) is missing
        raise TFRecordError(f"no filesystem for {url} ({exc})", path=url, hint=_HINT_INSTALL) from None
    except ValueError as exc:
        raise TFRecordError(f"cannot open {url}: {exc}", path=url,
                            hint="check the URL's scheme (s3://, gs://, memory://, ...)") from None
    except TypeError as exc:  # version_aware=False given for a URL that names a version
        raise _bad_options(exc, url) from None


def _bad_options(exc, url) -> InvalidArgumentError:
    hint = ("a URL that names an object version sets version_aware itself: leave it out of storage_options"
            if "version_aware" in str(exc) else "check storage_options (--storage-option) against the "
            "parameters of the filesystem (s3fs.S3FileSystem, gcsfs.GCSFileSystem, ...)")
    return InvalidArgumentError(f"the filesystem does not take these storage_options ({exc})", path=url, hint=hint)


def _not_found(url):
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), url)


@contextlib.contextmanager
def _naming(url):
    """Re-raise the cloud SDK's errors that name no URL (a missing bucket, no credentials, an
    OS error such as a failed upload) naming url and saying what to do."""
    try:
        yield
    except FileNotFoundError as exc:
        if exc.filename is not None:
            raise
        if _denied(exc.__cause__):  # fsspec's http reports a 401 or 403 (an expired signature) so
            raise _denial(exc.__cause__, url) from None
        if "NoSuchBucket" in type(exc.__cause__).__name__ or "bucket" in str(exc).lower():
            raise FileNotFoundError(errno.ENOENT, "no such bucket: create the bucket, or check its name in "
                                    "the URL", url) from None
        raise _not_found(url) from None
    except Exception as exc:
        if _denied(exc):
            raise _denial(exc, url) from None
        if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
            raise _bad_options(exc, url) from None  # the SDK's session refused an option (a typo)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None and exc.strerror:
            raise OSError(exc.errno, exc.strerror, url) from exc  # a failed upload: name its file
        if not _no_credentials(exc):
            raise
        raise TFRecordError(f"found no credentials for the object store ({exc})", path=url,
                            hint=_HINT_CREDENTIALS) from None


def _denied(exc) -> bool:
    """A refusal that names no file: s3fs's PermissionError (AccessDenied, a bad key or
    signature), gcsfs's 403 OSError("Forbidden: ...") and its 401/403 HttpError, aiohttp's
    401/403 ClientResponseError (fsspec's http)."""
    if exc is None or (isinstance(exc, OSError) and exc.filename is not None):
        return False
    status = getattr(exc, "status", None)
    status = status if isinstance(status, int) else getattr(exc, "code", None)
    return (isinstance(exc, PermissionError) or status in (401, 403)
            or (isinstance(exc, OSError) and exc.errno is None and str(exc).startswith("Forbidden")))


def _denial(exc, url) -> PermissionError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return PermissionError(errno.EACCES, f"the object store denied access ({reason}); check that the "
                           "credentials in use (storage_options, the SDK's environment) may read or "
                           "write it", url)


def _no_credentials(exc) -> bool:
    try:
        from botocore.exceptions import NoCredentialsError, PartialCredentialsError
    except ImportError:
        return False
    return isinstance(exc, (NoCredentialsError, PartialCredentialsError))


def open_input(path, storage_options=None):
    """A binary input stream: an unbuffered local file, a SignedStream for an S3 object, or
    an fsspec file read in blocks of BLOCK_BYTES (the next one fetched in the background)."""
    if not is_url(path):
        try:
            return open(local_path(path), "rb", buffering=0)
        except IsADirectoryError:
            raise IsADirectoryError(errno.EISDIR, "names a directory, not a file: give a file in it, or read "
                                    "all of its files with TFRecordDataset(directory)", path) from None
    if _bucket_only(path):
        raise _not_a_file(path)
    import fsspec.caching

    fs, p = filesystem(path, storage_options)
    if _signs_urls(fs):
        try:
            return SignedStream(fs, p, path)
        except _NotSigned:
            pass  # the store wants what the SDK sends: read through it
        except FileNotFoundError:
            raise _missing(fs, p, path) from None
    if "background" in fsspec.caching.caches:
        cache = {"cache_type": "background", "cache_options": {"maxblocks": _READ_AHEAD_BLOCKS}}
    else:
        cache = {"cache_type": "readahead"}
    try:
        with _naming(path):
            try:
                f = _fresh(fs, p, lambda: fs.open(p, "rb", block_size=BLOCK_BYTES, **cache))
            except TypeError:  # a filesystem without block options
                f = _fresh(fs, p, lambda: fs.open(p, "rb"))
    except FileNotFoundError:
        raise _missing(fs, p, path) from None
    if (getattr(f, "details", None) or {}).get("type") == "directory":  # s3fs opens a key prefix, empty
        f.close()
        raise _not_a_file(path, "directory")
    if not isinstance(getattr(f, "name", None), str):
        try:
            f.name = path
        except AttributeError:
            pass
    try:  # an archive's member reads through fs's handle on the archive, closed with fs
        f._tfrecord_lite_fs = fs
    except AttributeError:
        pass
    cache = getattr(f, "cache", None)
    if callable(getattr(cache, "fetcher", None)):  # each block's GET is refused as open was
        cache.fetcher = _named(cache.fetcher, path)
    if _protocols(fs) & {"http", "https"} and isinstance(getattr(f, "size", None), int):
        return _RangeFallback(fs, p, f)
    return f


def _named(fetch, url):
    """fetch(start, end), its errors named by _naming; an object replaced since it was
    opened (s3fs's FileExpired, from a GET conditional on its ETag) is the error that a
    SignedStream raises for it."""
    def named(start, end):
        with _naming(url):
            try:
                return fetch(start, end)
            except OSError as exc:
                if type(exc).__name__ != "FileExpired":
                    raise
                raise _changed(url, start) from None
    return named


def _signs_urls(fs) -> bool:
    """True when a presigned GET reads this filesystem's objects as its own client would:
    S3 without request payment, extra request parameters (SSE-C keys) or proxies."""
    if not _protocols(fs) & _SIGNED_PROTOCOLS or getattr(fs, "requester_pays", False):
        return False
    if getattr(fs, "asynchronous", False):  # its sign() is a coroutine, for an event loop's caller
        return False
    if getattr(fs, "s3_additional_kwargs", None) or (getattr(fs, "config_kwargs", None) or {}).get("proxies"):
        return False
    import urllib.request

    proxies = urllib.request.getproxies()
    return not (proxies.get("http") or proxies.get("https"))  # proxies are the SDK's to honour


def size(path, storage_options=None) -> int:
    return fingerprint(path, storage_options)[0]


def fingerprint(path, storage_options=None) -> tuple:
    """(size, stamp) of a file, stamp being what changes when it is rewritten, even to the
    same size: the local inode and change time (which, unlike the mtime, no copy that keeps
    times can set back), or what the store's info gives of ETag, generation and
    modification time. Whatever is learnt from a file is kept under it."""
    if not is_url(path):
        st = os.stat(local_path(path))
        return st.st_size, (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    fs, p = filesystem(path, storage_options)
    try:
        with _naming(path):
            info = _fresh(fs, p, lambda: fs.info(p))
    except FileNotFoundError:
        raise _missing(fs, p, path) from None
    if info.get("type") == "directory":
        raise _not_a_file(path, "directory")
    if info.get("size") is None:  # an HTTP response without Content-Length
        raise TFRecordError("its size is unknown: the server sends no Content-Length", path=path,
                            hint="read it as a stream (TFRecordReader, TFRecordDataset); counting, indexing "
                            "and random access need its size")
    return int(info["size"]), tuple((k, str(info[k])) for k in _VERSION_KEYS if info.get(k) is not None)


def exists(path, storage_options=None) -> bool:
    if not is_url(path):
        return os.path.exists(local_path(path))
    fs, p = filesystem(path, storage_options)
    with _naming(path):
        if fs.exists(p):
            return True
        if not getattr(fs, "dircache", None):
            return False
        _forget(fs, p)  # a listing kept from before it was written says it is not there
        return fs.exists(p)


def remove(path, storage_options=None, name=None) -> None:
    """Delete a file if it exists; an object store's errors name ``name`` (by default path:
    a writer names its data file for its sidecar too)."""
    if is_url(path):
        _check_writable(path, name)
    try:
        if not is_url(path):
            os.unlink(local_path(path))
        else:
            fs, p = filesystem(path, storage_options)
            with _opening_output(name or path), _renamed(name or path):
                fs.rm_file(p)
    except FileNotFoundError:
        pass
    except OSError as exc:
        # No file can have that name: too long (the sidecar of a long one), or under a file.
        if exc.errno not in (errno.ENAMETOOLONG, errno.ENOTDIR):
            raise


def read_bytes(path, storage_options=None) -> bytes:
    """A whole (small) file, such as an index sidecar."""
    if not is_url(path):
        with open(local_path(path), "rb") as f:
            return f.read()
    fs, p = filesystem(path, storage_options)
    try:
        with _naming(path):
            return fs.cat_file(p)
    except FileNotFoundError:
        raise _not_found(path) from None


def read_range(fs, p, start: int, end: int, url=None) -> bytes:
    """Bytes [start, end) of a remote file: one ranged request. Errors name url (by default
    the filesystem's URL of p)."""
    url = url or fs.unstrip_protocol(p)
    try:
        with _naming(url):
            data = fs.cat_file(p, start=start, end=end)  # keywords: s3fs takes version_id second
    except FileNotFoundError:  # gone since it was listed or indexed
        raise _missing(fs, p, url) from None
    # A server that ignores Range (python -m http.server, some static hosts) sends it all.
    return data[start:end] if len(data) > end - start else data


def expand(spec: str, storage_options=None) -> list[str]:
    """The files a remote glob or directory names, sorted, as URLs; a file is itself, even
    when its name holds glob characters (``s3://b/a[1].tfrecord``, an HTTP URL's query).
    ``**`` matches any number of directories, as a local glob's does. Hidden names (and
    files under hidden directories) and ``.index`` sidecars are left out, as locally."""
    fs, p = filesystem(spec, storage_options)

    def wanted(name, info):
        # "dir/" is a directory marker (an S3 console folder); an HTTP listing's links with
        # a query ("?C=N;O=D") sort the listing itself
        return (info.get("type") == "file" and not name.endswith(("/", ".index")) and not _hidden(name, p)
                and not (name.startswith(("http://", "https://")) and "?" in name))

    if pinned(spec):  # one object, its query no glob
        return [spec]
    parts = p.split("/")
    _forget(fs, "/".join(parts[:next((i for i, c in enumerate(parts) if GLOB_CHARS & set(c)), len(parts))]))
    with _naming(spec):  # listing needs credentials too
        # A name ending with "/" is a directory (over HTTP its listing page is no file);
        # isfile goes first otherwise: over HTTP isdir GETs the URL to list its links.
        if not spec.endswith("/") and fs.isfile(p):
            return [spec]
        if GLOB_CHARS & set(p):
            # "**" inside a name ("**.tfrecord") is "*", as in a local glob (fsspec refuses it)
            from .files import caret_negates

            pattern = "/".join(c if c == "**" else re.sub(r"\*{2,}", "*", c) for c in caret_negates(p).split("/"))
            found = fs.glob(pattern, detail=True)
        elif fs.isdir(p):
            found = {info["name"]: info for info in fs.ls(p, detail=True)}
        else:
            return [spec]
        if not found and _in_missing_bucket(fs, p):  # a glob finds nothing there, silently
            raise _no_bucket(spec)
    # A chain's other links stay on each file: leading bare protocols (simplecache::) and
    # the targets after the globbed link (zip://*.tfrecord::s3://b/x.zip).
    before, link, after = _links(spec)
    scheme = link.partition("://")[0]

    given = _as_given(link, p)

    def url(name):  # in the form asked for (s3a://, memory://p rather than memory:///p)
        found_url = given(name)
        if found_url is None:  # the filesystem's form, in the scheme asked for
            head, sep, tail = fs.unstrip_protocol(name).partition("://")
            found_url = (scheme if _aliases(head, scheme) else head) + sep + tail
        return before + found_url + after

    return sorted(url(name) for name, info in found.items() if wanted(name, info))


def _as_given(link: str, p: str):
    """name -> the URL of a listed name in the form of link, the URL that p (its path on the
    filesystem) was stripped from, or None where it cannot be told: the part of the name
    under p's fixed directories goes under the same directories as link spells them
    (``memory://p/*`` lists ``memory://p/a``, not the filesystem's ``memory:///p/a``)."""
    scheme, _, rest = link.partition("://")
    given, stripped = rest.rstrip("/").split("/"), p.rstrip("/").split("/")
    j = next((i for i, c in enumerate(given) if GLOB_CHARS & set(c)), len(given))
    k = next((i for i, c in enumerate(stripped) if GLOB_CHARS & set(c)), len(stripped))
    head, root = ("/".join(parts[:i]) + "/" if i else "" for parts, i in ((given, j), (stripped, k)))
    if given[j:] != stripped[k:]:
        return lambda name: None  # a path the filesystem rewrote beyond its root

    def url(name):
        return f"{scheme}://{head}{name[len(root):]}" if name.startswith(root) else None
    return url


def _aliases(a: str, b: str) -> bool:
    """Whether two schemes name one filesystem (s3 and s3a, gs and gcs)."""
    import fsspec

    try:
        return a == b or fsspec.get_filesystem_class(a) is fsspec.get_filesystem_class(b)
    except (ValueError, ImportError):
        return False


def _renames(fs) -> bool:
    """Whether fs has a mv of its own (a rename: local, sftp...). fsspec's generic one, a
    copy and a delete (memory://, object stores), expands glob characters in the names, so
    that 'd[1]/a' moves nothing; cp_file and rm_file take a name as it is."""
    from fsspec.spec import AbstractFileSystem

    return type(fs).mv is not AbstractFileSystem.mv


def move(fs, src: str, dst: str) -> None:
    """Rename src to dst (paths within fs), glob characters and all."""
    if _renames(fs):
        fs.mv(src, dst)
    else:
        fs.cp_file(src, dst)
        fs.rm_file(src)


def _protocols(fs) -> set:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


def _forget(fs, root: str) -> None:
    """Drop what fs keeps of the listings of root, the directories above it and those under
    it: s3fs keeps each listing for the life of the process, which then misses the files
    written since by others and lists those they deleted."""
    try:
        fs.invalidate_cache(root)
    except Exception:  # a filesystem whose cache cannot be dropped lists what it has
        return
    cache = getattr(fs, "dircache", None)
    if root and hasattr(cache, "pop"):
        for key in [k for k in list(cache) if isinstance(k, str) and k.startswith(root.rstrip("/") + "/")]:
            cache.pop(key, None)


def _fresh(fs, p, call):
    """call(), again once p's cached listings are dropped when it finds nothing: a listing
    made earlier in this process does not hold the files written since."""
    try:
        return call()
    except FileNotFoundError:
        if not getattr(fs, "dircache", None):
            raise
    _forget(fs, p)
    return call()


def _in_missing_bucket(fs, p: str) -> bool:
    """Whether p is on an object store (S3, GCS), in a bucket that does not exist (or that
    the store's exists() cannot probe: s3fs says False on a refusal too)."""
    return bool(_protocols(fs) & _TRANSACTIONAL) and not fs.exists(p.lstrip("/").split("/", 1)[0])


def _hidden(name: str, pattern: str) -> bool:
    """Whether name, a match of pattern, passes through a hidden name (a file or directory
    starting with ".") that no component of pattern starting with "." asked for: left out,
    as Python's glob and local directory listings leave them out (``**`` included)."""
    dotted = [c for c in pattern.split("/") if c.startswith(".")]
    return any(c.startswith(".") and not any(fnmatch.fnmatchcase(c, d) for d in dotted) for c in name.split("/"))


def is_special(path) -> bool:
    """Whether path is a local device, FIFO or socket (/dev/null, a named pipe): not a file
    to replace, but one to write into, as open() does (renaming over /dev/null would replace
    the device with a regular file)."""
    if is_url(path):
        return False
    try:
        mode = os.stat(local_path(path)).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def open_output(path, storage_options=None, *, fsync=False):
    """An atomic output (``.file``, ``.path``, ``commit()``, ``discard()``): a local
    AtomicFile, or a RemoteAtomicFile for a URL; a device or a pipe is written in place."""
    if is_url(path):
        return RemoteAtomicFile(path, storage_options)
    if is_special(path):
        return _InPlace(path)
    from .io import AtomicFile

    return AtomicFile(local_path(path), fsync=fsync)


def open_plain_output(path, storage_options=None):
    """A non-atomic output stream (data shows under the name as it is written)."""
    from .io import NamedWriter, check_output_name, make_parents

    if not is_url(path):
        path = local_path(path)
        check_output_name(path)
        make_parents(path)
        # Buffered: write takes everything or raises, naming the path.
        return NamedWriter(open(path, "wb", buffering=0), lambda: path)
    check_output_name(path, url=True)
    _check_writable(path)
    fs, p = filesystem(path, storage_options)
    with _opening_output(path, opening=True), _renamed(path):
        _make_parents(fs, p)
        return _NamingFile(fs.open(p, "wb"), path)


def _make_parents(fs, p) -> None:
    """Create the missing directories above p on a filesystem that has directories (sftp://,
    dir://...), as for a local output; object stores have none to make (and s3fs's makedirs
    would create a missing bucket: one named by a typo)."""
    if not _protocols(fs) & _TRANSACTIONAL:
        fs.makedirs(posixpath.dirname(p), exist_ok=True)


def make_dirs(url, storage_options=None) -> None:
    """Create a remote directory and those above it, where the filesystem has directories."""
    fs, p = filesystem(url, storage_options)
    with _opening_output(url), _renamed(url):
        _make_parents(fs, posixpath.join(p, "x"))


@contextlib.contextmanager
def _renamed(url):
    """An OSError that names a file (a temporary name, a path the filesystem stripped of its
    protocol) names url instead, the output the caller gave."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None or exc.filename == url or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, url) from exc


@contextlib.contextmanager
def _opening_output(url, opening=False):
    """_naming, and a filesystem that cannot write (fsspec's http raises a bare
    NotImplementedError; when opening, tar:// a "Read-only" ValueError) is a read-only file
    system error naming url."""
    try:
        with _naming(url):
            yield
    except (NotImplementedError, ValueError) as exc:
        if isinstance(exc, ValueError) and not (opening and "read-only" in str(exc).lower()):
            raise
        protocol = _links(url)[1].split("://", 1)[0]
        reason = f" ({exc})" if str(exc) else ""
        raise OSError(errno.EROFS, f"{protocol}:// URLs cannot be written{reason}: write to a local path or "
                      "an object store (s3://, gs://, ...), then upload it", url) from None


class _InPlace:
    """open_output of a device or a pipe: written as the data comes; commit() and discard()
    both close it (what was written cannot be taken back)."""

    def __init__(self, path):
        self.path = self.target = path
        self.file = open_plain_output(path)

    def commit(self) -> None:
        self.file.close()

    discard = commit


class _NamingFile:
    """A remote file whose write, flush and close (which upload parts as the data comes)
    raise _naming's errors; everything else is the file's own."""

    def __init__(self, f, url):
        self._f, self._url = f, url

    def write(self, data):
        with _naming(self._url):
            return self._f.write(data)

    def flush(self):
        with _naming(self._url):
            self._f.flush()

    def close(self):
        with _opening_output(self._url):
            self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


class RemoteAtomicFile:
    """A remote file that appears under ``path`` only at ``commit()``.

    On S3 and GCS the data goes straight to its key as a multipart upload that commit()
    completes and discard() aborts. Elsewhere it goes to a hidden temporary name beside the
    final one (``.<name>.<random>.tmp``, which directory listings and globs skip) and is
    moved into place by commit(). ``path`` may be changed before commit(): the complete
    file then lands under the new name (a copy on object stores)."""

    def __init__(self, path, storage_options=None):
        from .io import check_output_name

        check_output_name(path, url=True)
        _check_writable(path)
        self.path = path
        self._storage_options = storage_options
        self._fs, target = filesystem(path, storage_options)
        self._transactional = bool(_protocols(self._fs) & _TRANSACTIONAL)
        self._leftover = None  # an upload completed under a name that is not the final one
        with _opening_output(path, opening=True), _renamed(path):
            if self._transactional:
                self._key = target
                self._raw = self._fs.open(target, "wb", autocommit=False, block_size=WRITE_BLOCK_BYTES)
            else:
                parent, base = posixpath.split(target)
                self._key = posixpath.join(parent, f".{base}.{uuid.uuid4().hex[:12]}.tmp")
                _make_parents(self._fs, self._key)
                try:
                    self._raw = self._fs.open(self._key, "wb", block_size=WRITE_BLOCK_BYTES)
                except TypeError:
                    self._raw = self._fs.open(self._key, "wb")
        self.file = _NamingFile(self._raw, path)

    def commit(self) -> None:
        placed = None  # the final name, once a copy has put the data there
        try:
            with _opening_output(self.path), _renamed(self.path):
                target = self._fs._strip_protocol(filesystem(self.path, self._storage_options)[1])
                self._raw.close()
                if self._transactional:
                    self._raw.commit()
                if self._key != target:
                    if self._transactional or not _renames(self._fs):  # a copy and a delete: either may fail
                        self._leftover = self._key
                        self._fs.cp_file(self._key, target)
                        placed = target
                        self._fs.rm_file(self._key)
                        self._leftover = None
                    else:
                        self._fs.mv(self._key, target)
                    self._key = target
        except BaseException:
            if placed is not None:
                try:
                    self._fs.rm_file(placed)
                except Exception:
                    pass
            self.discard()
            raise

    def discard(self) -> None:
        try:
            if self._transactional:
                self._raw.discard()
                self._raw.closed = True  # its buffer is gone; close() would try to upload it
            else:
                self._raw.close()
        except Exception:
            pass
        if not self._transactional or self._leftover is not None:
            # A temporary name, or an upload completed under a hidden name (a rolled shard's)
            # that its move to the final name did not take away.
            try:
                self._fs.rm_file(self._key if self._leftover is None else self._leftover)
            except (OSError, NotImplementedError):  # gone, or a filesystem that cannot delete
                pass
