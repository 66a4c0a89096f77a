"""Build the benchmark workloads: deterministic (seeded) TFRecord files of tf.train.Examples.

W1 "images":  8 files x 1,250 image-like Examples of about 32 KiB each: random bytes under
              image/encoded, image/height, image/width and image/label (int64) and
              image/filename (bytes).
W2 "tabular": 1 file of 200,000 Examples with 18 small features each: 10 scalar floats
              (float_0..float_9), 5 scalar int64s (int_0..int_4, some negative), 2 short
              strings (str_0, str_1) and one list of 32 floats (float_list).

Examples are encoded here by hand in the protobuf wire format, in the byte order of
``SerializeToString(deterministic=True)`` (map keys sorted, packed float/int64 lists), so
generating data needs neither TensorFlow nor compiled protobuf classes. Files are written
with tfrecord_lite.TFRecordWriter. Existing files are kept, so a second run is free.

    python -m benchmarks.generate_data [--scale 1.0] [--out-dir benchmarks/data]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MANIFEST = "workloads.json"
SEED = 20240521

W1_FILES = 8
W1_RECORDS_PER_FILE = 1250
W1_IMAGE_BYTES = 32 * 1024  # mean size; each image is 30..34 KiB
W2_RECORDS = 200_000
W2_LIST_LEN = 32

__all__ = ["generate", "encode_example", "example_class", "load_manifest", "DATA_DIR"]


# -- protobuf wire format ------------------------------------------------------------------
# Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
# Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
# Each list holds `repeated ... value = 1`, packed for floats and int64s.

def _varint(n: int) -> bytes:
    """Base-128 varint, low group first; negative int64s are taken mod 2**64 (10 bytes)."""
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: tag byte (field << 3 | 2), varint length, payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _bytes_feature(values) -> bytes:
    return _len_field(0x0A, b"".join(_len_field(0x0A, v) for v in values))


def _float_feature(packed_le_f32: bytes) -> bytes:
    return _len_field(0x12, _len_field(0x0A, packed_le_f32) if packed_le_f32 else b"")


def _int64_feature(values) -> bytes:
    return _len_field(0x1A, _len_field(0x0A, b"".join(_varint(v) for v in values)) if len(values) else b"")


def encode_example(features: dict) -> bytes:
    """Serialize {key: ("bytes"|"float"|"int64", values)} as a tf.train.Example.

    Values: a list of bytes, a sequence of floats (or a float32 array), a sequence of ints.
    Keys are written sorted, matching SerializeToString(deterministic=True)."""
    entries = []
    for key in sorted(features, key=lambda k: k.encode()):
        kind, values = features[key]
        if kind == "bytes":
            feature = _bytes_feature(values)
        elif kind == "float":
            feature = _float_feature(np.asarray(values, dtype="<f4").tobytes())
        elif kind == "int64":
            feature = _int64_feature([int(v) for v in values])
        else:
            raise ValueError(f"unknown feature kind {kind!r} for {key!r}")
        entries.append(_len_field(0x0A, _len_field(0x0A, key.encode()) + _len_field(0x12, feature)))
    return _len_field(0x0A, b"".join(entries))


def example_class():
    """A tf.train.Example message class built at run time from a descriptor (protobuf
    package only), for checking that encode_example's bytes parse as an Example."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22
        from google.protobuf.message_factory import MessageFactory

        def GetMessageClass(descriptor):
            return MessageFactory().GetPrototype(descriptor)

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tfrecord_lite_bench_example.proto",
                                             package="tfrecord_lite_bench", syntax="proto3")

    def message(name, fields, options=None):
        m = fdp.message_type.add(name=name)
        if options:
            m.options.CopyFrom(options)
        for number, (fname, ftype, label, type_name, oneof) in enumerate(fields, 1):
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if oneof is not None:
                f.oneof_index = oneof
        return m

    opt = F.LABEL_OPTIONAL
    rep = F.LABEL_REPEATED
    p = ".tfrecord_lite_bench."
    message("BytesList", [("value", F.TYPE_BYTES, rep, None, None)])
    message("FloatList", [("value", F.TYPE_FLOAT, rep, None, None)]).field[0].options.packed = True
    message("Int64List", [("value", F.TYPE_INT64, rep, None, None)]).field[0].options.packed = True
    feature = message("Feature", [
        ("bytes_list", F.TYPE_MESSAGE, opt, p + "BytesList", 0),
        ("float_list", F.TYPE_MESSAGE, opt, p + "FloatList", 0),
        ("int64_list", F.TYPE_MESSAGE, opt, p + "Int64List", 0),
    ])
    feature.oneof_decl.add(name="kind")
    features = message("Features", [("feature", F.TYPE_MESSAGE, rep, p + "Features.FeatureEntry", None)])
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt, type_name=p + "Feature")
    message("Example", [("features", F.TYPE_MESSAGE, opt, p + "Features", None)])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("tfrecord_lite_bench.Example"))


# -- workloads -------------------------------------------------------------------------------

def _w1_records(file_index: int, count: int):
    rng = np.random.default_rng([SEED, 1, file_index])
    sizes = rng.integers(W1_IMAGE_BYTES - 2048, W1_IMAGE_BYTES + 2048, size=count)
    for i in range(count):
        height, width = (int(x) for x in rng.integers(64, 1024, size=2))
        yield encode_example({
            "image/encoded": ("bytes", [rng.bytes(int(sizes[i]))]),
            "image/filename": ("bytes", [f"train/{file_index:02d}/img_{i:06d}.jpg".encode()]),
            "image/height": ("int64", [height]),
            "image/label": ("int64", [int(rng.integers(0, 1000))]),
            "image/width": ("int64", [width]),
        })


def _w2_records(count: int):
    rng = np.random.default_rng([SEED, 2])
    # Values are drawn in blocks of rows with numpy; each row is then encoded on its own.
    float_keys = [f"float_{j}" for j in range(10)]
    int_keys = [f"int_{j}" for j in range(5)]
    categories = [b"red", b"green", b"blue", b"cyan", b"magenta", b"yellow", b"black", b"white"]
    block = 4096
    done = 0
    while done < count:
        n = min(block, count - done)
        floats = rng.standard_normal((n, 10)).astype("<f4")
        lists = rng.standard_normal((n, W2_LIST_LEN)).astype("<f4")
        ints = rng.integers(-(10**6), 10**9, size=(n, 5))
        ints[:, 0] = rng.integers(0, 100, size=n)  # a small id-like column
        cats = rng.integers(0, len(categories), size=n)
        tokens = rng.integers(0, 16**8, size=n)
        for r in range(n):
            features = {k: ("float", floats[r, j:j + 1]) for j, k in enumerate(float_keys)}
            features.update({k: ("int64", [int(ints[r, j])]) for j, k in enumerate(int_keys)})
            features["str_0"] = ("bytes", [categories[cats[r]]])
            features["str_1"] = ("bytes", [b"%08x" % int(tokens[r])])
            features["float_list"] = ("float", lists[r])
            yield encode_example(features)
        done += n


def _plan(scale: float):
    per_file = max(1, round(W1_RECORDS_PER_FILE * scale))
    return {
        "w1": {
            "description": f"images: {W1_FILES} files x {per_file:,} Examples of ~32 KiB",
            "files": [(os.path.join("w1_images", f"images-{i:05d}-of-{W1_FILES:05d}.tfrecord"),
                       per_file, (lambda i=i: _w1_records(i, per_file))) for i in range(W1_FILES)],
        },
        "w2": {
            "description": f"tabular: 1 file x {max(1, round(W2_RECORDS * scale)):,} Examples of 18 small features",
            "files": [(os.path.join("w2_tabular", "tabular-00000-of-00001.tfrecord"),
                       max(1, round(W2_RECORDS * scale)), lambda: _w2_records(max(1, round(W2_RECORDS * scale))))],
        },
    }


def load_manifest(out_dir: str = DATA_DIR) -> dict:
    """The workloads in out_dir as {name: {description, paths, records, bytes, ...}}."""
    with open(os.path.join(out_dir, MANIFEST)) as f:
        manifest = json.load(f)
    for w in manifest["workloads"].values():
        w["paths"] = [os.path.join(out_dir, rel) for rel in w["files"]]
    return manifest["workloads"]


def generate(scale: float = 1.0, out_dir: str = DATA_DIR, verbose: bool = False) -> dict:
    """Create the workloads under out_dir (keeping files that exist) and return
    {name: {description, files, paths, records, bytes, scale}}; also saved as workloads.json."""
    from tfrecord_lite import TFRecordWriter

    if scale <= 0:
        raise ValueError("scale must be positive")
    manifest_path = os.path.join(out_dir, MANIFEST)
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
        if old.get("scale") != scale:
            raise ValueError(
                f"{out_dir} holds workloads at scale {old.get('scale')}, not {scale}; "
                "delete it or choose another --out-dir"
            )
    workloads = {}
    for name, spec in _plan(scale).items():
        rels, records = [], 0
        for rel, count, make in spec["files"]:
            path = os.path.join(out_dir, rel)
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                t0 = time.perf_counter()
                with TFRecordWriter(path) as w:
                    w.write_many(make())
                if verbose:
                    print(f"wrote {path} ({count:,} records, {time.perf_counter() - t0:.1f}s)", file=sys.stderr)
            elif verbose:
                print(f"kept {path}", file=sys.stderr)
            rels.append(rel)
            records += count
        workloads[name] = {
            "description": spec["description"],
            "files": rels,
            "records": records,
            "bytes": sum(os.path.getsize(os.path.join(out_dir, r)) for r in rels),
            "scale": scale,
        }
    os.makedirs(out_dir, exist_ok=True)
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"scale": scale, "seed": SEED, "workloads": workloads}, f, indent=2)
    os.replace(tmp, manifest_path)
    for w in workloads.values():
        w["paths"] = [os.path.join(out_dir, rel) for rel in w["files"]]
    return workloads


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts (default 1.0)")
    ap.add_argument("--out-dir", default=DATA_DIR)
    args = ap.parse_args(argv)
    for name, w in generate(args.scale, args.out_dir, verbose=True).items():
        print(f"{name}: {w['description']}: {w['records']:,} records, {w['bytes'] / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
