"""The ``tfrecord-lite`` command (also ``python -m tfrecord_lite``).

Each subcommand is a ``cmd_<name>(args) -> exit code`` plus its parser in ``_build_parser``
(schema, stats and to-parquet: ``_cli_table``). Errors print one line saying what went
wrong and what to do, and exit non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import errno
import inspect
import json
import logging
import os
import re
import sys

from ._version import __version__
from . import fs as _fs
from .errors import InvalidArgumentError, NotTFRecordError, RecordTooLargeError, TFRecordError
from .files import resolve_files
from .index import build_index, check_seekable, not_a_file
from .io import check_tfrecord, normalize_compression
from .ops import merge, split, tracked_blocks
from .progress import progress
from .reader import DEFAULT_MAX_RECORD_BYTES, ON_CORRUPT, TFRecordReader
from .writer import file_names


_COMPRESSIONS = ["auto", "none", "gzip", "zlib"]
# What a command without --on-corrupt suggests for a damaged file.
_SALVAGE = "copy the good records with: tfrecord-lite cat FILE --on-corrupt skip -o OUT"
# An argument as the library's hints spell it: on_corrupt='skip' or 'stop', compression=None,
# a larger max_record_bytes.
_PYTHON_ARGUMENT = re.compile(r"\b(on_corrupt|compression)=(None|'\w+')((?:,? or '\w+')*)|\b(max_record_bytes)\b")


def _reader_args(p, on_corrupt=True, max_record=True):
    p.add_argument("--compression", default="auto", type=str.lower, choices=_COMPRESSIONS,
                   help="auto (default: detected), none, gzip or zlib")
    if on_corrupt:
        _on_corrupt_args(p)
    if max_record:
        _max_record_args(p)


def _max_record_args(p, more=""):
    p.add_argument("--max-record-bytes", type=_count(1), default=DEFAULT_MAX_RECORD_BYTES, metavar="N",
                   help="a record whose length field says more is an error (default 2 GiB: larger is "
                   f"seldom real, and usually a damaged length){more}")


def _on_corrupt_args(p, more=""):
    p.add_argument("--on-corrupt", default="raise", choices=ON_CORRUPT,
                   help="at a damaged record: raise (default: exit 1 naming it), skip (drop it and "
                   "read on) or stop (end there, keeping the records before it); each dropped "
                   f"record is named on stderr{more}")


def _count(minimum):
    """An argparse type: an int >= minimum."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return parse


def _level(text):
    """An argparse type: a deflate level, 0 to 9."""
    value = _count(0)(text)
    if value > 9:
        raise argparse.ArgumentTypeError(f"must be 0 to 9, not {value}")
    return value


def _path(text):
    """An argparse type: a path that is not empty (an unset shell variable gives one, which
    read as ': no such file')."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file (is a shell variable unset?)")
    return text


def _names(text):
    """An argparse type: comma-separated names ("id, label" too) as a list."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated feature names, not {text!r}")
    return names


def _check(path, compression, storage_options=None):
    """Refuse a file that is not TFRecord at all before reading it as one. A pipe (/dev/stdin,
    <(zcat ...)) can be read only once: the reader checks it."""
    if _fs.is_special(path):
        return
    with _fs.open_input(path, storage_options) as f:
        check_tfrecord(f, path, normalize_compression(compression, allow_auto=True))


def _verifying(args) -> bool:
    """merge, split and cat's --verify: implied by --on-corrupt skip or stop, as only a
    verified copy finds the records whose data is damaged."""
    return args.verify or args.on_corrupt != "raise"


def _open(path, args, **kw):
    _check(path, args.compression, _storage(args))
    kw.setdefault("on_corrupt", getattr(args, "on_corrupt", "raise"))
    kw.setdefault("max_record_bytes", getattr(args, "max_record_bytes", DEFAULT_MAX_RECORD_BYTES))
    return TFRecordReader(path, compression=normalize_compression(args.compression, allow_auto=True),
                          storage_options=_storage(args), **kw)


@contextlib.contextmanager
def _skip_log(handler=None):
    """Send the readers' log line per dropped record to handler, or nowhere (verify prints
    each problem itself)."""
    logger = logging.getLogger("tfrecord_lite")
    saved = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [handler or logging.NullHandler()], False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = saved


class _SkipReport(logging.Handler):
    """Under --on-corrupt skip or stop: names each dropped record once on stderr, without the
    log line's hint (which spells the Python option)."""

    def __init__(self, command):
        super().__init__(logging.WARNING)
        self.command, self.seen = command, set()

    def emit(self, record):
        err = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if not isinstance(err, TFRecordError):
            print(f"tfrecord-lite {self.command}: {record.getMessage()}", file=sys.stderr)
            return
        key = (str(err.path), err.offset, err.index, err.detail)  # to-parquet's sample reads it twice
        if key not in self.seen:
            self.seen.add(key)
            print(f"tfrecord-lite {self.command}: dropped {_without_hint(err)}", file=sys.stderr)


def _without_hint(err) -> str:
    """err's message without its advice, for a list of problems (verify, dropped records)."""
    err = copy.copy(err)
    err.hint = None
    return err._render()


def _in_cli_words(exc, args) -> str:
    """exc's message with the Python arguments its hint names spelled as the command's options
    (on_corrupt='skip' as --on-corrupt skip, compression=None as --compression none, or
    --input-compression where the command has one, max_record_bytes as --max-record-bytes); a
    command without the option says the file is damaged (and one without --on-corrupt points
    to cat)."""
    if not exc.hint or not _PYTHON_ARGUMENT.search(exc.hint):
        return str(exc)
    if "on_corrupt=" in exc.hint and not hasattr(args, "on_corrupt"):
        if "max_record_bytes" in exc.hint and hasattr(args, "max_record_bytes"):  # index: the record may be real
            exc.hint = re.sub(r"\(on_corrupt=[^)]*\)", f"({_SALVAGE})", exc.hint)
            exc.hint = _PYTHON_ARGUMENT.sub("--max-record-bytes", exc.hint)
        else:
            exc.hint = f"The file is damaged: {_SALVAGE}"
    elif "max_record_bytes" in exc.hint and not hasattr(args, "max_record_bytes"):
        exc.hint = "The file is damaged: pass --on-corrupt skip to drop bad records"
    else:
        def option(m):
            if m[4]:
                return "--max-record-bytes"
            name = "input_compression" if m[1] == "compression" and hasattr(args, "input_compression") else m[1]
            values = re.sub(r"'(\w+)'", r"\1", m[2] + m[3]).replace("None", "none")
            return f"--{name.replace('_', '-')} {values}"
        exc.hint = _PYTHON_ARGUMENT.sub(option, exc.hint)
    exc.args = (exc._render(),)
    return str(exc)


def _storage_option(text):
    """KEY=VALUE for --storage-option: VALUE is JSON when it parses (true, 3, {...}), else a
    string; dots in KEY nest (client_kwargs.endpoint_url=...)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    try:
        value = json.loads(value)
    except ValueError:
        pass
    for part in reversed(key.split(".")[1:]):
        value = {part: value}
    return key.split(".")[0], value


def _storage(args):
    """The storage_options given with --storage-option, merged (None when there are none)."""
    pairs = getattr(args, "storage_option", None)
    if not pairs:
        return None
    out: dict = {}
    for key, value in pairs:
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _input_files(args) -> list[str]:
    """Each FILE argument as the files it names: itself, or a glob's matches and a
    directory's files, sorted (as TFRecordDataset resolves them), so that a pattern the shell
    did not expand (quoted, or an s3:// URL) reads the same in every command. A file whose
    name holds glob characters is itself; "-" is standard input, as a pipe (./- names a file)."""
    return [path for spec in args.files
            for path in (["/dev/stdin"] if spec == "-" else resolve_files(spec, _storage(args)))]


def _progress_args(p):
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr (default: when stderr is a terminal)")


def _say(bar, line):
    """Print line to stdout now, above the progress bar if one is shown."""
    clear = getattr(bar, "clear", None)  # tqdm's; the silent stand-in has none
    if clear:
        clear()
    print(line, flush=True)
    if clear:
        bar.refresh()


def _bar(args, desc):
    # A pipe has no size to show progress against: the bar then counts bytes read.
    total = None if any(map(_fs.is_special, args.files)) else sum(_fs.size(f, _storage(args)) for f in args.files)
    return progress(total, desc=desc, enabled=args.progress, unit="B")


def cmd_count(args) -> int:
    """Print the record count of each file and the total."""
    total = 0
    with _bar(args, "count") as bar:
        for path in args.files:  # each line as its file is done: an error in a later file keeps it
            with _open(path, args, check_crc=not args.no_crc) as r:
                n = sum(len(offsets) for offsets, _ in tracked_blocks(r, bar, r.record_spans()))
            _say(bar, f"{n}\t{path}")
            total += n
    if len(args.files) > 1:
        print(f"{total}\ttotal")
    return 0


def cmd_verify(args) -> int:
    """Check every CRC of every record; report each bad record; exit 1 if any."""
    bad = foreign = 0
    too_large = False
    with _bar(args, "verify") as bar, _skip_log():
        for path in args.files:  # each file's report as it is done: a later file's error keeps it
            try:
                with _open(path, args, on_corrupt="skip") as r:
                    n = sum(len(offsets) for offsets, _ in tracked_blocks(r, bar, r.record_spans()))
                    problems = r.skipped
            except NotTFRecordError as exc:
                _say(bar, f"NOT TFRECORD {_in_cli_words(exc, args)}\nnot a TFRecord file\t{path}")
                foreign += 1
                continue
            except TFRecordError as exc:  # one that skipping cannot pass
                n, problems = 0, [exc]
            for err in problems:
                _say(bar, f"CORRUPT {_without_hint(err)}")
            bad += len(problems)
            too_large = too_large or any(isinstance(err, RecordTooLargeError) for err in problems)
            status = "OK" if not problems else f"{len(problems)} bad"
            _say(bar, f"{status}\t{n} good records\t{path}")
    if foreign:
        print(f"{foreign} file(s) are not TFRecord files.", file=sys.stderr)
    if bad:
        print(f"{bad} corrupt record(s) found. Re-create the damaged files, or {_SALVAGE}.", file=sys.stderr)
    if too_large:
        print("A length over --max-record-bytes may be a real record that large: pass a larger "
              "--max-record-bytes to read it.", file=sys.stderr)
    return 1 if bad or foreign else 0


# Output name endings that say the file is compressed (readers here detect compression from
# the bytes, not the name; TensorFlow needs it named either way).
_COMPRESSED_ENDINGS = {".gz": "gzip", ".gzip": "gzip", ".zlib": "zlib", ".zz": "zlib"}


def _check_output_compression(args, out, name=None, suffix=False) -> None:
    """Refuse, in the command's words (out: what the command writes), --index with
    --compression gzip/zlib, --compression-level without either, and an output name (name,
    or the shards' suffix) ending in .gz or .zlib without --compression: uncompressed data
    under a name that says gzip would fail gzip tools and readers told the name's compression."""
    ending = os.path.splitext(name or "")[1].lower()
    if args.compression is None and ending in _COMPRESSED_ENDINGS:
        named = f"--suffix {name}" if suffix else "the output name"
        them = "the shards" if suffix else out
        raise TFRecordError(f"{named} ends in {ending}, but no --compression was given, so {them} would be "
                            "written uncompressed", path=None if suffix else name,
                            hint=f"Pass --compression {_COMPRESSED_ENDINGS[ending]} to compress "
                            f"{'them' if suffix else 'it'}, or --compression none to write "
                            f"{'them' if suffix else 'it'} uncompressed under that name")
    if args.compression_level is not None and args.compression in (None, "none"):
        raise TFRecordError(f"--compression-level {args.compression_level} applies to compressed {out}, but "
                            f"--compression is {args.compression or 'none'}",
                            hint="Pass --compression gzip or zlib with it, or leave it out")
    if getattr(args, "index", False) and args.compression not in (None, "none"):
        raise TFRecordError(f"--index needs uncompressed {out}, but --compression {args.compression} was given: "
                            "records in a compressed stream have no byte offsets to index",
                            hint="Leave out --index or --compression")


def cmd_merge(args) -> int:
    """Concatenate TFRecord files into one, copying records verbatim (never re-encoded)."""
    _check_output_compression(args, "OUT", args.output)
    if args.index and (args.output == "-" or not_a_file(args.output)):
        raise TFRecordError("--index writes OUT.index beside OUT, but OUT is "
                            + ("standard output" if args.output == "-" else "a pipe or a device"),
                            path=args.output, hint="Leave out --index, or write OUT to a file")
    with _bar(args, "merge") as bar:
        out = merge(args.files, _sink(args), compression=args.compression,
                    compression_level=args.compression_level, input_compression=args.input_compression,
                    verify=_verifying(args), index=args.index, progress=bar, storage_options=_storage(args),
                    on_corrupt=args.on_corrupt, max_record_bytes=args.max_record_bytes,
                    check_headers=args.check_headers)
    counted = "" if out.records is None else f"{_plural(out.records, 'record')}, "
    print(f"{counted}{_plural(len(args.files), 'file')} -> {out.path}", file=sys.stderr)
    return 0


def _plural(n, noun) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cmd_split(args) -> int:
    """Split a TFRecord file into N shards of contiguous records (shard 0 gets the first)."""
    if _fs.is_special(args.file):
        raise TFRecordError("split reads its input twice (to count the records, then to copy them), but a "
                            "pipe can be read only once", path=args.file,
                            hint="Copy it to a file first: tfrecord-lite cat FILE -o copy.tfrecord")
    _check_output_compression(args, "shards", args.suffix, suffix=True)
    shards = split(args.file, args.num_shards, args.prefix, suffix=args.suffix,
                   compression=args.compression, compression_level=args.compression_level,
                   input_compression=args.input_compression, verify=_verifying(args), index=args.index,
                   progress=args.progress, storage_options=_storage(args), on_corrupt=args.on_corrupt,
                   max_record_bytes=args.max_record_bytes)
    for s in shards:
        print(f"{s.records}\t{s.path}")
    return 0


def cmd_index(args) -> int:
    """Write the index sidecar (FILE.index: "offset length" per record) of each file."""
    for path in args.files:  # before any sidecar is written
        check_seekable(path)
    with _bar(args, "index") as bar:
        for path in args.files:  # each line as its sidecar is written: an error in a later file keeps it
            _check(path, "auto", _storage(args))
            sidecar = build_index(path, check_crc=not args.no_crc, progress=bar, storage_options=_storage(args),
                                  max_record_bytes=args.max_record_bytes)
            n = _fs.read_bytes(sidecar, _storage(args)).count(b"\n")
            _say(bar, f"{n}\t{sidecar}")
    return 0


def cmd_cat(args) -> int:
    """Write the records of FILEs, in order, as one TFRecord stream (default: uncompressed)."""
    _check_output_compression(args, "OUT", args.output)
    with _bar(args, "cat") as bar:  # named for the command, not the merge beneath it
        merge(args.files, _sink(args), compression=args.compression, compression_level=args.compression_level,
              input_compression=args.input_compression, verify=_verifying(args), progress=bar,
              storage_options=_storage(args), on_corrupt=args.on_corrupt, max_record_bytes=args.max_record_bytes,
              check_headers=args.check_headers)
    return 0


def _sink(args):
    """Where merge and cat write: -o OUT, or standard output for -o - (and cat without -o),
    refused when it is a terminal."""
    if args.output not in (None, "-"):
        return args.output
    if sys.stdout.isatty():
        raise TFRecordError("refusing to write binary TFRecord data to a terminal",
                            hint="redirect stdout (> out.tfrecord) or pass -o FILE")
    # stdout redirected to a file (> out.tfrecord.gz): its name is checked as -o's is
    for name, _ in file_names(sys.stdout.buffer)[:1]:
        _check_output_compression(args, "the output", name)
    sys.stdout.flush()
    return sys.stdout.buffer


def cmd_head(args) -> int:
    """Show the first N records of each FILE: size, then the features when the record is a
    tf.train.Example (a SequenceExample's context and feature lists), else a hex preview.
    Records are numbered in their file; with several files each is named as errors name it
    ("FILE, record 0")."""
    where = "{}, " if len(args.files) > 1 else ""
    with progress(args.n * len(args.files), desc="head", enabled=args.progress) as bar:
        for path in args.files:
            left = args.n
            with _open(path, args) as r:
                for batch in r.record_batches() if left else ():
                    for i in range(min(len(batch), left)):  # numbered in the file, records dropped counted
                        print(f"{where.format(path)}record {batch.locate(i)[2]}: {len(batch[i])} bytes")
                        print(_preview(batch[i], args.width))
                        bar.update()
                    left -= min(len(batch), left)
                    if not left:
                        break
    return 0


def _preview(record: bytes, width: int) -> str:
    from .errors import ExampleDecodeError
    from .example import decode_example, decode_sequence_example

    context = lists = None
    if record:
        try:
            context, lists = decode_sequence_example(record)
        except ExampleDecodeError:
            try:
                context = decode_example(record)
            except ExampleDecodeError:
                pass
    if lists:
        return "\n".join(["  context:"]
                         + [f"    {name}: {_show_value(value, width)}" for name, value in context.items()]
                         + ["  feature lists:"]
                         + [f"    {name}: {_show_steps(steps, width)}" for name, steps in lists.items()])
    if context:
        return "\n".join(f"  {name}: {_show_value(value, width)}" for name, value in context.items())
    text = "  " + record[:width].hex(" ", 1)
    if len(record) > width:
        text += f" ... (+{len(record) - width} bytes)"
    return text


def _show_steps(steps, width: int) -> str:
    shown = "; ".join(_show_value(step, width) for step in steps[:3])
    more = f"; ... ({len(steps)} steps)" if len(steps) > 3 else ""
    return f"{len(steps)} step{'s' if len(steps) != 1 else ''} [{shown}{more}]"


def _show_value(value, width: int) -> str:
    if isinstance(value, list):  # bytes_list
        shown = ", ".join(repr(v[:width]) + ("..." if len(v) > width else "") for v in value[:4])
        more = f", ... ({len(value)} values)" if len(value) > 4 else ""
        return f"bytes[{len(value)}] [{shown}{more}]"
    items = ", ".join(map(str, value[:8]))  # NumPy's float32 repr: 0.1, not 0.10000000149011612
    more = f", ... ({len(value)} values)" if len(value) > 8 else ""
    return f"{value.dtype}[{len(value)}] [{items}{more}]"


def cmd_demo(args) -> int:
    """Write a sharded dataset of image-like tf.train.Examples (a 48x48x3 uint8 image, its
    label and name), read it back through the parallel pipeline, verify every record against
    what was written, and report throughput."""
    from .demo import run_demo

    return run_demo(args.records, args.shards)


_EPILOG_MERGE = """\
Each input's compression is detected; the output is uncompressed unless --compression says
otherwise (an OUT ending in .gz or .zlib is refused without it). Every record header is
checked (its length and the length's CRC), and each input must end where its last record
ends, so a truncated input is refused; --verify checks the data CRCs too. Uncompressed to
uncompressed without --verify reads each input once to check its headers, then copies its
bytes in the kernel; --no-header-check skips that read, checking only each input's first
record header. OUT appears only when the merge succeeds.

examples:
  tfrecord-lite merge train-*.tfrecord -o train.tfrecord
  tfrecord-lite merge a.tfrecord.gz b.tfrecord -o all.tfrecord.gz --compression gzip --verify
  tfrecord-lite merge parts/*.tfrecord -o all.tfrecord --index
"""

_EPILOG_SPLIT = """\
Shards are named PREFIX-00000-of-0000N.tfrecord. Shard 0 gets the first records, and shard
sizes differ by at most one record, so reading the shards in order gives FILE's order back.
All shards appear together, or none if anything fails.

examples:
  tfrecord-lite split train.tfrecord -n 16
  tfrecord-lite split big.tfrecord.gz -n 8 --prefix shards/big --compression gzip --suffix .tfrecord.gz --verify
"""

_EPILOG_INDEX = """\
Each line of FILE.index is "<offset> <frame length>" for one record, the format the tfrecord
package and DALI use. Compressed files cannot be indexed: decompress them with cat first.

examples:
  tfrecord-lite index train-*.tfrecord
  tfrecord-lite cat data.tfrecord.gz -o data.tfrecord && tfrecord-lite index data.tfrecord
"""

_EPILOG_CAT = """\
Records are copied verbatim; only the compression wrapper changes. Useful to decompress,
recompress or concatenate into a pipe. Every record header is checked and a truncated input
is refused, as in merge (--no-header-check: see merge --help).

examples:
  tfrecord-lite cat data.tfrecord.gz > data.tfrecord
  tfrecord-lite cat data.tfrecord --compression gzip > data.tfrecord.gz
  tfrecord-lite cat a.tfrecord b.tfrecord --compression gzip -o ab.tfrecord.gz
  tfrecord-lite cat shard-*.tfrecord | some-consumer
"""


_EPILOG_EXIT = ("exit status: 0 done; 1 damaged or non-TFRecord input, a failed verify, or another "
                "error; 2 a usage error, or a FILE that names nothing (no such file, or a glob or "
                "directory without files); 130 interrupted; 141 output pipe closed early (| head)")


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: FILEs may come after options too (count a.tfrecord --no-crc
    b.tfrecord), which plain argparse refuses as unrecognized arguments."""

    _mixing = False

    def parse_known_args(self, args=None, namespace=None):
        # parse_known_intermixed_args calls back here (before Python 3.12), and loses the
        # FILEs after a "--" (Python 3.11)
        if self._mixing:
            return super().parse_known_args(args, namespace)
        if "--" in (args or ()):
            namespace, extras = super().parse_known_args(args, namespace)
        else:
            self._mixing = True
            try:
                namespace, extras = self.parse_known_intermixed_args(args, namespace)
            finally:
                self._mixing = False
        if extras:  # here, with this command's usage, not the top parser's
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfrecord-lite",
        description="Read, write and check TFRecord files without TensorFlow.",
        epilog=_EPILOG_EXIT,
    )
    parser.add_argument("--version", action="version", version=f"tfrecord_lite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)

    p = sub.add_parser("demo", help="write, read back and verify a sample sharded dataset",
                       description=cmd_demo.__doc__)
    p.add_argument("--records", type=_count(1), default=20000, help="records in total (default 20000)")
    p.add_argument("--shards", type=_count(1), default=4, help="number of shard files (default 4)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("count", help="count records in files", description=cmd_count.__doc__)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("--no-crc", action="store_true", help="skip data CRC checks (faster)")
    _reader_args(p)
    _progress_args(p)
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("verify", help="check every record's CRCs; exit 1 on corruption",
                       description=cmd_verify.__doc__)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    _reader_args(p, on_corrupt=False)
    _progress_args(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("head", help="show the first records of files", description=cmd_head.__doc__)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("-n", type=_count(0), default=5, help="records per file (default 5)")
    p.add_argument("--width", type=_count(1), default=32,
                   help="bytes shown of a record's hex preview and of each bytes value (default 32)")
    _reader_args(p)
    _progress_args(p)
    p.set_defaults(func=cmd_head)

    def add(name, func, help, epilog):
        return sub.add_parser(name, help=help, description=inspect.cleandoc(func.__doc__), epilog=epilog,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    def writing_args(p, what, inputs="the inputs (default: detected per file)", each="each input"):
        p.add_argument("--compression", default=None, type=str.lower, choices=_COMPRESSIONS[1:],
                       help=f"compression of {what} (default none; a name ending in .gz or .zlib "
                       "needs it given)")
        p.add_argument("--compression-level", default=None, type=_level, metavar="LEVEL",
                       help="deflate level of --compression gzip or zlib: 1 (fastest) to 9 (smallest), "
                       "0 for none (default 6, as TensorFlow's writer)")
        p.add_argument("--input-compression", default="auto", type=str.lower, choices=_COMPRESSIONS,
                       help=f"compression of {inputs}")
        p.add_argument("--verify", action="store_true",
                       help="check every record's data CRC on the way (slower; without it only "
                       f"record headers are checked: each length, its CRC, and that {each} ends "
                       "where its last record does)")
        if what != "the shards":
            p.add_argument("--no-header-check", dest="check_headers", action="store_false",
                           help="copy uncompressed inputs to uncompressed output as plain bytes without "
                           "reading them first: only each input's first record header is checked, so a "
                           "truncated or damaged input is copied as it is (faster on slow disks)")
        _max_record_args(p, "" if what == "the shards" else "; --no-header-check reads no lengths")

    p = add("merge", cmd_merge, "concatenate files into one, records copied verbatim", _EPILOG_MERGE)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE", help="input files, in order")
    p.add_argument("-o", "--output", required=True, type=_path, metavar="OUT",
                   help="the merged file (- for standard output; ./- names a file)")
    writing_args(p, "OUT")
    _on_corrupt_args(p, "; skip and stop imply --verify")
    p.add_argument("--index", action="store_true", help="also write OUT.index (uncompressed OUT only)")
    _progress_args(p)
    p.set_defaults(func=cmd_merge)

    p = add("split", cmd_split, "split a file into N shards of contiguous records", _EPILOG_SPLIT)
    p.add_argument("file", type=_path, metavar="FILE")
    p.add_argument("-n", "--num-shards", type=_count(1), required=True, metavar="N", help="number of shards")
    p.add_argument("--prefix", default=None, type=_path,
                   help="shard name prefix (default: FILE without its .tfrecord/.gz extensions; DIR/ puts "
                   "shards of that name in DIR)")
    p.add_argument("--suffix", default=".tfrecord",
                   help="shard name suffix (default .tfrecord, with --compression too: pass .tfrecord.gz "
                   "to mark gzip shards)")
    writing_args(p, "the shards", "FILE (default: detected)", "FILE")
    _on_corrupt_args(p, "; skip and stop imply --verify")
    p.add_argument("--index", action="store_true", help="also write an .index sidecar per shard")
    _progress_args(p)
    p.set_defaults(func=cmd_split)

    p = add("index", cmd_index, "write FILE.index sidecars for random access", _EPILOG_INDEX)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE", help="uncompressed TFRecord files")
    p.add_argument("--no-crc", action="store_true", help="skip data CRC checks (faster)")
    _max_record_args(p)
    _progress_args(p)
    p.set_defaults(func=cmd_index)

    p = add("cat", cmd_cat, "write files as one TFRecord stream (decompresses by default)", _EPILOG_CAT)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("-o", "--output", default=None, type=_path, metavar="OUT",
                   help="write to OUT (default, or -: standard output; ./- names a file)")
    writing_args(p, "the output")
    _on_corrupt_args(p, "; skip and stop imply --verify")
    _progress_args(p)
    p.set_defaults(func=cmd_cat)

    from ._cli_table import add_table_commands  # imported here: it imports this module
    add_table_commands(sub, add)

    for name, p in sub.choices.items():  # every command that takes paths (all but demo) takes fsspec URLs
        if name == "demo":
            continue
        p.add_argument("--storage-option", type=_storage_option, action="append", metavar="KEY=VALUE",
                       help="fsspec storage option for s3://, gs://... paths (repeatable; VALUE is "
                       "JSON or a string; dots nest: client_kwargs.endpoint_url=URL). fsspec's "
                       "FSSPEC_<PROTOCOL>_<KEY> and the cloud SDKs' variables (AWS_ENDPOINT_URL, "
                       "credentials) are read too")
    return parser


def main(argv=None) -> int:
    try:
        code = _main(argv)
    except SystemExit:  # --help, a usage error
        _flush_or_drop()
        raise
    except BrokenPipeError:  # the reader left (| head -1): quietly, but not as a success that was not
        # (verify's verdict was not seen); 128 + SIGPIPE, as a shell reports a tool ended by it
        _drop_stdout()
        return 141
    except KeyboardInterrupt:  # before a command started
        print("tfrecord-lite: interrupted", file=sys.stderr)
        return 130
    failed = _flush_or_drop()  # now, not at exit, where a failure is "Exception ignored" and status 120
    if failed is None:
        return code
    if not isinstance(failed, BrokenPipeError):
        print(f"tfrecord-lite: writing standard output: {failed.strerror or failed}", file=sys.stderr)
    return code or (141 if isinstance(failed, BrokenPipeError) else 1)


def _flush_or_drop():
    """Flush stdout; if that fails, drop what it holds (see _drop_stdout) and return the error."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        _drop_stdout()
        return exc
    return None


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that what it still holds is not flushed at exit into the
    pipe or file that failed (the recipe of Python's signal module documentation)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a file (captured, replaced)
        pass


def _main(argv) -> int:
    args = _build_parser().parse_args(argv)
    skips = _SkipReport(args.command) if getattr(args, "on_corrupt", "raise") != "raise" else None
    try:
        if hasattr(args, "files"):
            try:
                args.files = _input_files(args)
            except InvalidArgumentError as exc:  # a glob or directory naming no file: as a missing file
                print(f"tfrecord-lite {args.command}: {_in_cli_words(exc, args)}", file=sys.stderr)
                return 2
        with _skip_log(skips) if skips else contextlib.nullcontext():
            return args.func(args)
    except TFRecordError as exc:
        print(f"tfrecord-lite {args.command}: {_in_cli_words(exc, args)}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        plain = exc.strerror in (None, os.strerror(errno.ENOENT))  # else it says more (a missing bucket)
        print(f"tfrecord-lite {args.command}: {exc.filename}: {'no such file' if plain else exc.strerror}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outputs are atomic: nothing half-written is left to explain
        print(f"tfrecord-lite {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except IsADirectoryError as exc:  # free space and permissions have nothing to do with it
        print(f"tfrecord-lite {args.command}: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"tfrecord-lite {args.command}: {where}{exc.strerror or exc}; check the path, "
              "permissions and free space", file=sys.stderr)
        _flush_or_drop()  # if stdout failed, once is enough
        return 1


if __name__ == "__main__":
    sys.exit(main())
