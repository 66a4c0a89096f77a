"""Build the benchmark workloads: deterministic (seeded) TFRecord files of tf.train.Examples.

W1 "images":  8 files x 1,250 image-like Examples of about 32 KiB each: random bytes under
              image/encoded, image/height, image/width and image/label (int64) and
              image/filename (bytes).
W2 "tabular": 1 file of 200,000 Examples with 18 small features each: 10 scalar floats
              (float_0..float_9), 5 scalar int64s (int_0..int_4, some negative), 2 short
              strings (str_0, str_1) and one list of 32 floats (float_list).
many:         1,000 files of 20 W2 Examples each in one directory (generate_many_files).

The same W2 rows are available as numpy columns (w2_columns) for the encoders, and SPECS
describes every workload's features once, turned into each reader's spec by lite_features,
tf_features and tfrecord_description.

Examples are encoded here by hand in the protobuf wire format, in the byte order of
``SerializeToString(deterministic=True)`` (map keys sorted, packed float/int64 lists), so
generating data needs neither TensorFlow nor compiled protobuf classes. Files are written
with tfrecord_lite.TFRecordWriter. Existing files are kept, so a second run is free.

    python -m benchmarks.generate_data [--scale 1.0] [--out-dir benchmarks/data] [--many-files]
"""

from __future__ import annotations

import argparse
import json
import os
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
MANY_FILES = 1000
MANY_RECORDS_PER_FILE = 20
_W2_BLOCK = 4096
_W2_CATEGORIES = [b"red", b"green", b"blue", b"cyan", b"magenta", b"yellow", b"black", b"white"]

__all__ = ["generate", "generate_many_files", "w2_columns", "encode_example", "example_class", "load_manifest",
           "lite_features", "tf_features", "tfrecord_description", "numpy_batch", "tf_examples", "SPECS", "DATA_DIR"]


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


def _w2_block(rng, n: int) -> dict:
    """n W2 rows as numpy columns, drawn from rng (the draws that _w2_records encodes)."""
    floats = rng.standard_normal((n, 10)).astype("<f4")
    lists = rng.standard_normal((n, W2_LIST_LEN)).astype("<f4")
    ints = rng.integers(-(10**6), 10**9, size=(n, 5))
    ints[:, 0] = rng.integers(0, 100, size=n)  # a small id-like column
    cats = rng.integers(0, len(_W2_CATEGORIES), size=n)
    tokens = rng.integers(0, 16**8, size=n)
    cols = {f"float_{j}": floats[:, j].copy() for j in range(10)}
    cols.update({f"int_{j}": ints[:, j].astype(np.int64) for j in range(5)})
    cols["str_0"] = np.array([_W2_CATEGORIES[c] for c in cats.tolist()], dtype=object)
    cols["str_1"] = np.array([b"%08x" % t for t in tokens.tolist()], dtype=object)
    cols["float_list"] = lists
    return cols


def _w2_blocks(count: int):
    rng = np.random.default_rng([SEED, 2])
    done = 0
    while done < count:
        n = min(_W2_BLOCK, count - done)
        yield _w2_block(rng, n)
        done += n


def w2_columns(rows: int) -> dict:
    """The first `rows` rows of W2 as numpy columns: float_0..float_9 float32 (rows,),
    int_0..int_4 int64 (rows,), str_0/str_1 object arrays of bytes, float_list float32
    (rows, 32). Row for row the same values as the W2 file (whose records are these rows
    serialized deterministically), so encoders can be checked against it byte for byte."""
    blocks = list(_w2_blocks(rows))
    return {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}


def _w2_records(count: int):
    # Values are drawn in blocks of rows with numpy; each row is then encoded on its own.
    for cols in _w2_blocks(count):
        names = list(cols)
        for r in range(len(cols["float_list"])):
            features = {}
            for k in names:
                v = cols[k][r]
                if k.startswith("float_") and k != "float_list":
                    features[k] = ("float", cols[k][r:r + 1])
                elif k.startswith("int_"):
                    features[k] = ("int64", [int(v)])
                elif k.startswith("str_"):
                    features[k] = ("bytes", [v])
                else:
                    features[k] = ("float", v)
            yield encode_example(features)


# -- feature specs, one description for every reader -------------------------------------------
# {feature: (kind, shape)}, kind "bytes" | "float" | "int64"; every feature is fixed-length.

SPECS = {
    "w1": {
        "image/encoded": ("bytes", []),
        "image/filename": ("bytes", []),
        "image/height": ("int64", []),
        "image/label": ("int64", []),
        "image/width": ("int64", []),
    },
    "w2": {
        **{f"float_{j}": ("float", []) for j in range(10)},
        **{f"int_{j}": ("int64", []) for j in range(5)},
        "str_0": ("bytes", []),
        "str_1": ("bytes", []),
        "float_list": ("float", [W2_LIST_LEN]),
    },
}
SPECS["many"] = SPECS["w2"]


def lite_features(workload: str) -> dict:
    """The workload's spec for tfrecord_lite.parse_example / TFRecordDataset(features=...)."""
    from tfrecord_lite import FixedLenFeature

    dtypes = {"bytes": bytes, "float": np.float32, "int64": np.int64}
    return {k: FixedLenFeature(shape, dtypes[kind]) for k, (kind, shape) in SPECS[workload].items()}


def tf_features(workload: str) -> dict:
    """The workload's spec for tf.io.parse_example (imports TensorFlow)."""
    import tensorflow as tf

    dtypes = {"bytes": tf.string, "float": tf.float32, "int64": tf.int64}
    return {k: tf.io.FixedLenFeature(shape, dtypes[kind]) for k, (kind, shape) in SPECS[workload].items()}


def tfrecord_description(workload: str) -> dict:
    """The workload's description for the `tfrecord` package's readers."""
    names = {"bytes": "byte", "float": "float", "int64": "int"}
    return {k: names[kind] for k, (kind, _) in SPECS[workload].items()}


def tf_examples(cols: dict):
    """Each row of W2-shaped numpy columns as tf.train.Example bytes, built the way TensorFlow
    users do (a Feature per value, SerializeToString(deterministic=True)); imports TensorFlow."""
    import tensorflow as tf

    Feature, Example, Features = tf.train.Feature, tf.train.Example, tf.train.Features
    kinds = {k: SPECS["w2"][k][0] for k in cols}

    def feature(kind, v):
        if kind == "bytes":
            return Feature(bytes_list=tf.train.BytesList(value=[v]))
        if kind == "int64":
            return Feature(int64_list=tf.train.Int64List(value=[v]))
        return Feature(float_list=tf.train.FloatList(value=v if v.ndim else [v]))

    for i in range(len(cols["float_list"])):
        ex = Example(features=Features(feature={k: feature(kinds[k], cols[k][i]) for k in cols}))
        yield ex.SerializeToString(deterministic=True)


def numpy_batch(rows: list, workload: str) -> dict:
    """Rows from the `tfrecord` package's readers (dicts of numpy arrays) stacked into one
    batch shaped like parse_example's output: numbers (batch, *shape), bytes an object array."""
    out = {}
    for k, (kind, shape) in SPECS[workload].items():
        if kind == "bytes":
            out[k] = np.array([bytes(r[k]) for r in rows], dtype=object)
        else:
            out[k] = np.stack([r[k] for r in rows]).reshape((len(rows), *shape))
    return out


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


def generate_many_files(scale: float = 1.0, out_dir: str = DATA_DIR, verbose: bool = False) -> dict:
    """The many-files workload: MANY_FILES files in one directory, each holding
    max(1, round(MANY_RECORDS_PER_FILE * scale)) consecutive W2 rows; the file count does not
    scale, since many descriptors is the point. Kept if it exists at this scale. Returns
    {description, dir, paths, records, bytes, scale}."""
    from tfrecord_lite import TFRecordWriter

    per_file = max(1, round(MANY_RECORDS_PER_FILE * scale))
    directory = os.path.join(out_dir, "many_files")
    marker = os.path.join(out_dir, "many_files.json")
    paths = [os.path.join(directory, f"part-{i:05d}.tfrecord") for i in range(MANY_FILES)]
    done = None
    if os.path.exists(marker):
        with open(marker) as f:
            done = json.load(f)
        if done.get("scale") != scale:
            raise ValueError(f"{directory} holds files at scale {done.get('scale')}, not {scale}; "
                             "delete it or choose another --out-dir")
    if done is None:
        os.makedirs(directory, exist_ok=True)
        t0 = time.perf_counter()
        records = _w2_records(MANY_FILES * per_file)
        for path in paths:
            with TFRecordWriter(path) as w:
                w.write_many([next(records) for _ in range(per_file)])
        with open(marker, "w") as f:
            json.dump({"scale": scale, "records_per_file": per_file}, f)
        if verbose:
            print(f"wrote {directory} ({MANY_FILES:,} files, {time.perf_counter() - t0:.1f}s)", file=sys.stderr)
    return {
        "description": f"many files: {MANY_FILES:,} files x {per_file:,} W2 Examples in one directory",
        "dir": directory,
        "paths": paths,
        "records": MANY_FILES * per_file,
        "bytes": sum(os.path.getsize(p) for p in paths),
        "scale": scale,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts (default 1.0)")
    ap.add_argument("--out-dir", default=DATA_DIR)
    ap.add_argument("--many-files", action="store_true", help="also build the 1,000-file directory")
    args = ap.parse_args(argv)
    for name, w in generate(args.scale, args.out_dir, verbose=True).items():
        print(f"{name}: {w['description']}: {w['records']:,} records, {w['bytes'] / 1e6:.1f} MB")
    if args.many_files:
        w = generate_many_files(args.scale, args.out_dir, verbose=True)
        print(f"many: {w['description']}: {w['records']:,} records, {w['bytes'] / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
