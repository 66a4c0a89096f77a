"""What a commit replaces: each existing file an output is about to take the name of is kept
aside under a hidden name (``.<name>.<random>.old``: a hard link on local disks, a
server-side copy on object stores) until the commit stands, then dropped; put back if the
commit is undone (a later file of its group failing). A file that cannot be kept is never
replaced."""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import uuid

from .errors import TFRecordError
from .fs import WRITE_BLOCK_BYTES, _denied, _naming, _no_credentials, filesystem, is_url, local_path, remove
from .io import _temp_stem

__all__ = ["keep_replaced", "put_back", "drop_kept"]

# os.link's errors where the filesystem has no hard links (FAT, some network filesystems)
# or the file has too many: a copy may still work there.
_NO_LINKS = frozenset({errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def keep_replaced(names, storage_options=None) -> list:
    """(name, copy) for each existing file among names (see _keep: a hard link, or a
    server-side copy on an object store): what a commit replaces survives until the commit
    stands. An existing file that cannot be kept raises (_keep), before anything is replaced."""
    kept = []
    try:
        for name in dict.fromkeys(names):
            copy = _keep(name, storage_options)
            if copy is not None:
                kept.append((name, copy))
    except BaseException:  # one cannot be kept: nothing gets replaced, so no copy is needed
        drop_kept(kept, storage_options)
        raise
    return kept


def put_back(kept, storage_options=None) -> None:
    """Undo a commit's replacements: each (name, copy) of keep_replaced() goes back under
    its name (_put_back)."""
    for name, copy in kept:
        _put_back(name, copy, storage_options)


def drop_kept(kept, storage_options=None) -> None:
    """The commit stands: remove the copies keep_replaced() made."""
    for _, copy in kept:
        try:
            remove(copy, storage_options)
        except Exception:
            pass  # a leftover under a hidden name


def _keep(path, storage_options=None):
    """A copy of an existing file under a hidden name beside it (``.<name>.<random>.old``),
    or None when there is no file: what a commit is about to replace, kept until the commit
    stands. A hard link on local disks (a copy where links fail); on object stores a
    server-side copy (the bytes never travel through here), or a copy through here on a
    filesystem without copies. An existing file that cannot be kept raises TFRecordError:
    replacing it then could lose it for good if the commit failed."""
    if not is_url(path):
        path = local_path(path)
        if not os.path.isfile(path):
            return None
        head, base = os.path.split(path)
        copy = os.path.join(head, f".{_temp_stem(base)}.{uuid.uuid4().hex[:12]}.old")
        try:
            try:
                os.link(path, copy)
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    raise  # a copy would fail the same way (or the file is gone: nothing to keep)
                import shutil

                shutil.copyfile(path, copy)
        except FileNotFoundError:
            if not os.path.lexists(path):
                return None
            raise _unkept(path, None) from None
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(copy)  # a partial copy
            raise _unkept(path, exc) from exc
        return copy
    fs, p = filesystem(path, storage_options)
    head, base = posixpath.split(p)
    copy = posixpath.join(head, f".{_temp_stem(base)}.{uuid.uuid4().hex[:12]}.old")
    try:
        try:
            fs.cp_file(p, copy)
        except NotImplementedError:  # no copies on this filesystem: through here, in blocks
            with fs.open(p, "rb") as src, fs.open(copy, "wb") as dst:
                while block := src.read(WRITE_BLOCK_BYTES):
                    dst.write(block)
    except FileNotFoundError:  # nothing there: the usual case
        return None
    except Exception as exc:
        # Credentials that may write but not read (s3fs's exists() says False then, or the
        # probe is refused too) cannot keep anything: the write goes on as it would without.
        try:
            there = fs.exists(p)
        except Exception as probe:
            if _no_credentials(probe):
                with _naming(path):  # says where to set them
                    raise
            there = not (_denied(probe) or _denied(probe.__cause__))
        if not there:
            return None
        with contextlib.suppress(Exception):
            fs.rm_file(copy)
        raise _unkept(path, exc) from exc
    return fs.unstrip_protocol(copy)


def _unkept(path, exc) -> TFRecordError:
    reason = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return TFRecordError(f"the existing file could not be copied aside{reason}, so nothing was replaced: "
                         "replacing it could lose it if the write then failed", path=path,
                         hint="free space or fix permissions in its directory and write again, or move the "
                         "existing file away (or delete it) first, or write to another name")


def _put_back(path, copy, storage_options=None) -> None:
    """Undo a commit: the copy that _keep() made goes back under path. A local copy that is
    still path's own file (never replaced) is dropped instead. If this fails the copy stays
    under its hidden name, never lost, and a RuntimeWarning says where it is."""
    try:
        if not is_url(path):
            path = local_path(path)
            if os.path.lexists(path) and os.path.samefile(copy, path):
                os.unlink(copy)  # never replaced (a rename between two links to it does nothing)
            else:
                os.replace(copy, path)
            return
        fs, p = filesystem(path, storage_options)
        copy_p = filesystem(copy, storage_options)[1]
        fs.cp_file(copy_p, p)
    except Exception as exc:
        import warnings

        # The error that undid the commit is on its way up: this one must not replace it.
        warnings.warn(f"{path}: the failed write could not put the previous file back ({type(exc).__name__}: "
                      f"{exc}); it is kept as {copy}: rename it to {path}", RuntimeWarning, stacklevel=2)
        return
    with contextlib.suppress(Exception):
        fs.rm_file(copy_p)  # else a leftover under a hidden name
