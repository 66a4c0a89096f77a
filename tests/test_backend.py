"""Backend selection: the compiled core by default, the twin on request or as a fallback."""

import os
import subprocess
import sys

import tfrecord_lite
from tfrecord_lite import _native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "TFRECORD_LITE_PURE_PYTHON"}
    full.update(env)
    return subprocess.run([sys.executable, "-W", "always", "-c", code], env=full, cwd=ROOT,
                          capture_output=True, text=True, check=True)


def test_compiled_core_is_the_default():
    out = run("import tfrecord_lite; print(tfrecord_lite.implementation)")
    assert out.stdout.strip() == "cython"
    assert "RuntimeWarning" not in out.stderr


def test_env_var_forces_the_twin():
    out = run("import tfrecord_lite; print(tfrecord_lite.implementation)", TFRECORD_LITE_PURE_PYTHON="1")
    assert out.stdout.strip() == "python"
    assert out.stderr == ""


def test_missing_compiled_core_falls_back_with_a_warning():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tfrecord_lite._framing': raise ImportError('simulated broken build')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import tfrecord_lite\n"
        "print(tfrecord_lite.implementation)\n"
        "print(list(tfrecord_lite.TFRecordReader(bytes(tfrecord_lite._native.framing.encode_frames([b'ok'])))))\n"
    )
    out = run(code)
    assert out.stdout.split() == ["python", "[b'ok']"]
    assert "RuntimeWarning" in out.stderr and "simulated broken build" in out.stderr


def test_use_switches_and_restores(backend):
    assert tfrecord_lite.implementation == backend.name
    other = "python" if backend.name == "cython" else "cython"
    with _native.use(other):
        assert tfrecord_lite.implementation == other
        assert _native.framing.__name__.endswith("_py") == (other == "python")
    assert tfrecord_lite.implementation == backend.name


def test_library_never_imports_tensorflow_or_torch():
    out = run("import sys, tfrecord_lite, tfrecord_lite.cli; "
              "print([m for m in ('tensorflow', 'torch', 'jax') if m in sys.modules])")
    assert out.stdout.strip() == "[]"


def test_compiled_install_needs_neither_protobuf_nor_crc32c_at_import():
    # The twins (and the packages they need) are imported only when the twin is chosen.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('google', 'crc32c'): raise ImportError('absent: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import numpy as np, tfrecord_lite as tfl\n"
        "recs = tfl.encode_examples({'x': np.arange(3)})\n"
        "frames = bytes(tfl._native.framing.encode_frames(recs))\n"
        "print(tfl.implementation, tfl.parse_example(list(tfl.TFRecordReader(frames)),\n"
        "      {'x': tfl.FixedLenFeature([], np.int64)})['x'].tolist(), tfl.masked_crc32c(b'a') > 0)\n"
        "print(sorted(m for m in sys.modules if m.endswith('_py') or m.split('.')[0] in ('google', 'crc32c')))\n"
    )
    out = run(code)
    assert out.stdout.split("\n")[:2] == ["cython [0, 1, 2] True", "[]"]
    assert "RuntimeWarning" not in out.stderr
