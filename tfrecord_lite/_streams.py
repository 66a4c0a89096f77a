"""Streams over HTTP that fs.open_input hands out: SignedStream, one presigned GET per S3
object received straight into the reader's buffer, and _RangeFallback, an fsspec HTTP file
that goes on through one plain GET when the server ignores Range."""

from __future__ import annotations

import http.client
import io
import os
import time
import urllib.parse

from .errors import TFRecordError

_SIGNED_SECONDS = 3600  # a presigned URL is checked when a GET starts, not while it streams
_STREAM_ATTEMPTS = 4  # GETs per read before a dropped connection is an error
_TIMEOUT = 60  # seconds without a byte before a GET counts as dropped (botocore's default)


class _NotSigned(Exception):
    """The first presigned GET was refused: read through the filesystem instead."""


class SignedStream(io.RawIOBase):
    """A seekable remote file read through one presigned GET from the current position to
    the end. ``readinto`` receives straight into the caller's buffer (the socket read
    releases the GIL), so the transfer runs beside the parsing threads instead of through
    an event loop shared with them.

    A dropped connection is resumed with a ranged GET at the same byte, up to
    ``_STREAM_ATTEMPTS`` times; resumed GETs carry the first response's ETag
    (``If-Match``), so a file replaced meanwhile is an error, never a splice of two."""

    def __init__(self, fs, path: str, name: str):
        super().__init__()
        self._fs, self._path, self.name = fs, path, name
        self._pos, self._etag, self._response = 0, None, None
        self.size = None
        self._retrying(lambda: self._open(first=True))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        if base + offset != self._pos:
            self._pos = base + offset
            self._drop()
        return self._pos

    def readinto(self, view) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if self._pos >= self.size or not len(view):
            return 0
        n = self._retrying(lambda: self._receive(view))
        self._pos += n
        return n

    def _receive(self, view) -> int:
        if self._response is None:
            self._open()
        n = self._response.readinto(view)
        if not n:
            raise http.client.IncompleteRead(b"", self.size - self._pos)
        return n

    def _retrying(self, action):
        """action(), again on a fresh GET from the same byte when the connection fails."""
        failure = None
        for attempt in range(_STREAM_ATTEMPTS):
            try:
                return action()
            except FileNotFoundError:
                raise
            except (http.client.HTTPException, OSError) as exc:
                failure = exc
            self._drop()
            time.sleep(0.1 * attempt)
        if isinstance(failure, PermissionError):  # refused each time (credentials expired): say so
            raise failure
        raise TFRecordError(f"reading {self.name} failed at byte {self._pos} after {_STREAM_ATTEMPTS} "
                            f"attempts: {failure!r}", path=self.name, offset=self._pos,
                            hint="check the network and the object store, then read it again")

    def close(self) -> None:
        self._drop()
        super().close()

    def _drop(self) -> None:
        if self._response is not None:
            self._response.close()  # not drained: the rest of the object is never wanted
            self._connection.close()
            self._response = None

    def _open(self, first: bool = False) -> None:
        """GET from self._pos to the end; the first one also learns the size and ETag."""
        from . import fs as _paths  # which imports this module

        headers = {"Range": f"bytes={self._pos}-"} if self._pos else {}
        if self._etag:
            headers["If-Match"] = self._etag
        with _paths._naming(self.name):
            url = urllib.parse.urlsplit(self._fs.sign(self._path, expiration=_SIGNED_SECONDS))
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(url.hostname, url.port, timeout=_TIMEOUT,
                                                     context=_tls(self._fs))
        else:
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=_TIMEOUT)
        connection.request("GET", f"{url.path}?{url.query}" if url.query else url.path, headers=headers)
        response = connection.getresponse()
        # A first response without a size (chunked) leaves nothing to read up to: not this way.
        if response.status in (200, 206) and not (first and _total_size(response) is None):
            self._connection, self._response = connection, response
            if first:
                self._etag = response.getheader("ETag")
                self.size = _total_size(response)
            elif response.status == 200:  # a store that ignores Range sends it all: skip to _pos
                left = self._pos
                while left:
                    got = len(response.read(min(left, 1 << 20)))
                    if not got:
                        raise http.client.IncompleteRead(b"", left)
                    left -= got
            return
        response.close()
        connection.close()
        if response.status == 404:
            raise _paths._not_found(self.name)
        if first:
            raise _NotSigned(response.status)
        if response.status == 412:
            raise _changed(self.name, self._pos)
        if response.status in (401, 403):  # retried (signed anew), then reported as a denial
            raise _paths._denial(http.client.HTTPException(f"HTTP {response.status} {response.reason}"), self.name)
        raise http.client.HTTPException(f"HTTP {response.status}")  # retried, then reported


def _changed(name, offset) -> TFRecordError:
    return TFRecordError(f"{name} changed while it was read (at byte {offset})", path=name, offset=offset,
                         hint="read it again from the start")


def _total_size(response):
    """The object's size from a 200's Content-Length or a 206's Content-Range, or None."""
    content_range = response.getheader("Content-Range")
    if content_range and content_range.rsplit("/", 1)[1].isdigit():
        return int(content_range.rsplit("/", 1)[1])
    length = response.getheader("Content-Length")
    return int(length) if length and length.isdigit() else None


_tls_contexts: dict = {}


def _tls(fs):
    """An SSL context that verifies certificates as the filesystem's own client does."""
    verify = (getattr(fs, "client_kwargs", None) or {}).get("verify", os.environ.get("AWS_CA_BUNDLE", True))
    context = _tls_contexts.get(verify)
    if context is None:
        import ssl

        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        else:
            from botocore.httpsession import get_cert_path

            context = ssl.create_default_context(cafile=get_cert_path(verify))
        _tls_contexts[verify] = context
    return context


class _RangeFallback(io.RawIOBase):
    """An HTTP file read in ranged blocks that, once the server shows it ignores Range (fsspec
    then refuses every block after the first), reads on through one plain GET from the byte
    reached; a seek then starts a GET anew and skips to its target."""

    def __init__(self, fs, p, f):
        super().__init__()
        self._fs, self._p, self._f, self._streaming = fs, p, f, False
        self.name, self.size = f.name, f.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, view) -> int:
        try:
            return self._f.readinto(view)
        except ValueError as exc:
            if self._streaming or "range requests" not in str(exc):
                raise
        self._stream_from(self._f.tell())
        return self._f.readinto(view)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if not self._streaming:
            return self._f.seek(offset, whence)
        target = {io.SEEK_SET: 0, io.SEEK_CUR: self._f.tell(), io.SEEK_END: self.size}[whence] + offset
        if target != self._f.tell():
            self._stream_from(target)
        return target

    def _stream_from(self, pos: int) -> None:
        self._f.close()
        self._f, self._streaming = self._fs.open(self._p, "rb", block_size=0), True
        while pos:
            got = len(self._f.read(min(pos, 1 << 20)))
            if not got:
                break  # past the end: reads find nothing, as after a seek past a file's end
            pos -= got

    def close(self) -> None:
        self._f.close()
        super().close()
