"""The ``tfrecord-lite`` command (also ``python -m tfrecord_lite``).

Each subcommand is a ``cmd_<name>(args) -> exit code`` plus its parser in ``_build_parser``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from . import __version__, _native
from .errors import TFRecordError
from .reader import TFRecordReader
from .writer import TFRecordWriter


def _reader_args(p):
    p.add_argument("--compression", default="auto", help="auto (default), none, gzip or zlib")


def _open(path, args, **kw):
    compression = None if args.compression == "none" else args.compression
    return TFRecordReader(path, compression=compression, **kw)


def cmd_count(args) -> int:
    """Print the record count of each file and the total."""
    total = 0
    for path in args.files:
        with _open(path, args, check_crc=not args.no_crc) as r:
            n = sum(1 for _ in r)
        total += n
        print(f"{n}\t{path}")
    if len(args.files) > 1:
        print(f"{total}\ttotal")
    return 0


def cmd_verify(args) -> int:
    """Check every CRC of every record; report each bad record; exit 1 if any."""
    bad = 0
    for path in args.files:
        try:
            with _open(path, args, on_corrupt="skip") as r:
                n = sum(1 for _ in r)
                problems = r.skipped
        except TFRecordError as exc:  # damaged compressed stream: nothing more can be read
            n, problems = 0, [exc]
        for err in problems:
            print(f"CORRUPT {err}", file=sys.stdout)
        bad += len(problems)
        status = "OK" if not problems else f"{len(problems)} bad"
        print(f"{status}\t{n} good records\t{path}")
    if bad:
        print(f"{bad} corrupt record(s) found. Re-create the damaged files, or read them with "
              "on_corrupt='skip' to keep the good records.", file=sys.stderr)
    return 1 if bad else 0


def cmd_head(args) -> int:
    """Show the first N records: size and a preview."""
    with _open(args.file, args) as r:
        for i, record in enumerate(r):
            if i >= args.n:
                break
            print(f"record {i}: {len(record)} bytes")
            print(_preview(record, args.width))
    return 0


def _preview(record: bytes, width: int) -> str:
    shown = record[:width]
    text = "  " + shown.hex(" ", 1)
    if len(record) > width:
        text += f" ... (+{len(record) - width} bytes)"
    return text


def cmd_demo(args) -> int:
    """Write a small sharded dataset of image-like records, read it back and verify it."""
    import numpy as np

    rng = np.random.default_rng(0)
    num_shards, per_shard = args.shards, args.records // args.shards
    height = width = 48
    images = rng.integers(0, 256, size=(per_shard, height, width, 3), dtype=np.uint8)
    print(f"tfrecord_lite {__version__} ({_native.implementation} core, "
          f"CRC32C: {_native.framing.crc32c_backend()})")
    with tempfile.TemporaryDirectory(prefix="tfrecord-lite-demo-") as tmp:
        paths = [os.path.join(tmp, f"images-{i:05d}-of-{num_shards:05d}.tfrecord") for i in range(num_shards)]
        expected = [img.tobytes() for img in images]
        t0 = time.perf_counter()
        for path in paths:
            with TFRecordWriter(path) as w:
                w.write_many(expected)
        t_write = time.perf_counter() - t0
        nbytes = sum(os.path.getsize(p) for p in paths)
        t0 = time.perf_counter()
        count = 0
        for path in paths:
            for i, record in enumerate(TFRecordReader(path)):
                if record != expected[i]:
                    print(f"MISMATCH in {path} record {i}", file=sys.stderr)
                    return 1
                count += 1
        t_read = time.perf_counter() - t0
        n = num_shards * per_shard
        if count != n:
            print(f"expected {n} records, read {count}", file=sys.stderr)
            return 1
        print(f"wrote {n} records ({nbytes / 1e6:.1f} MB) in {num_shards} shards under {tmp}")
        print(f"write: {n / t_write:,.0f} records/s, {nbytes / t_write / 1e6:,.0f} MB/s")
        print(f"read+verify: {n / t_read:,.0f} records/s, {nbytes / t_read / 1e6:,.0f} MB/s")
        print(f"all {count} records verified (CRC32C and content)")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfrecord-lite",
        description="Read, write and check TFRecord files without TensorFlow.",
    )
    parser.add_argument("--version", action="version", version=f"tfrecord_lite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("demo", help="write, read back and verify a sample sharded dataset",
                       description=cmd_demo.__doc__)
    p.add_argument("--records", type=int, default=4000, help="records in total (default 4000)")
    p.add_argument("--shards", type=int, default=4, help="number of shard files (default 4)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("count", help="count records in files", description=cmd_count.__doc__)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--no-crc", action="store_true", help="skip data CRC checks (faster)")
    _reader_args(p)
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("verify", help="check every record's CRCs; exit 1 on corruption",
                       description=cmd_verify.__doc__)
    p.add_argument("files", nargs="+", metavar="FILE")
    _reader_args(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("head", help="show the first records of a file", description=cmd_head.__doc__)
    p.add_argument("file", metavar="FILE")
    p.add_argument("-n", type=int, default=5, help="number of records (default 5)")
    p.add_argument("--width", type=int, default=32, help="bytes of hex preview per record")
    _reader_args(p)
    p.set_defaults(func=cmd_head)
    return parser


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TFRecordError as exc:
        print(f"tfrecord-lite {args.command}: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"tfrecord-lite {args.command}: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
