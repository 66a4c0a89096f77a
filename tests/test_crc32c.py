"""CRC32C against the crc32c package: every length 0..1600 and long inputs around the block
sizes the hardware paths run three streams over (3 x 64, 3 x 256, 3 x 4096 bytes; the
carry-less path's streams of 1 to 32 words) and the 512-bit folds' (from 256 bytes, 256 at
a time, then 64), at unaligned offsets, on both backends and, for the compiled core, every
path: the hardware path, the table path and, on x86 CPUs with carry-less multiply, the
narrower paths that CPUs without it, or without AVX-512 and VPCLMULQDQ, run."""

import os
import random
import subprocess
import sys

import crc32c as reference
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfrecord_lite

LONG = 3 * 4096
LENGTHS = list(range(1601)) + [LONG - 1, LONG, LONG + 1, LONG + 3 * 256 + 3 * 64 + 7, 2 * LONG + 13, 32768, 65536,
                               100_003]
_X86_PATHS = ["sse4.2+vpclmulqdq", "sse4.2+pclmul", "sse4.2"]  # fastest first


def _paths():
    """The compiled core's paths on this CPU: with the hardware and table paths, the x86 paths
    narrower than the hardware one."""
    from tfrecord_lite import _native

    if "cython" not in _native.available():
        return ["hardware", "table"]
    best = _native._compiled["framing"].crc32c_backend()
    return ["hardware", "table", *(_X86_PATHS[_X86_PATHS.index(best) + 1:] if best in _X86_PATHS else [])]


@pytest.fixture(params=_paths())
def crc_path(request, backend):
    """Each CRC path of the active backend (the twin has only the crc32c package's)."""
    if backend.name == "cython":
        try:
            if request.param in _X86_PATHS:
                assert backend.framing._select_crc32c_path(request.param) == request.param
            else:
                backend.framing.set_crc32c_backend(request.param)
        except ValueError:
            pytest.fail("this CPU has no CRC32C instruction; hardware path untestable here")
        yield backend
        backend.framing.set_crc32c_backend("hardware")
    else:
        yield backend


def test_check_value_and_masks(backend):
    assert tfrecord_lite.crc32c(b"123456789") == 0xE3069283
    assert tfrecord_lite.masked_crc32c(b"") == 0xA282EAD8
    assert tfrecord_lite.masked_crc32c(bytes(8)) == 0x07980329
    assert backend.framing.crc32c(b"123456789") == 0xE3069283


def test_every_length_and_offset(crc_path):
    rng = random.Random(1)
    for n in LENGTHS:
        data = rng.randbytes(n + 16)
        for offset in range(9):
            chunk = memoryview(data)[offset : offset + n]
            assert crc_path.framing.crc32c(chunk) == reference.crc32c(chunk), (n, offset)


def test_continuation_matches_whole(crc_path):
    data = os.urandom(5000)
    for cut in (0, 1, 7, 8, 769, 4999, 5000):
        partial = crc_path.framing.crc32c(data[:cut])
        assert crc_path.framing.crc32c(data[cut:], partial) == reference.crc32c(data)


@given(data=st.binary(max_size=2200), value=st.integers(0, 2**32 - 1), offset=st.integers(0, 63))
def test_any_start_value_and_data(crc_path, data, value, offset):
    # The folds XOR the CRC so far into their first register, the joins multiply it on: any
    # start value, any length and alignment, as the crc32c package computes it.
    buf = memoryview(bytes(offset) + data)[offset:]
    assert crc_path.framing.crc32c(buf, value) == reference.crc32c(data, value)


def test_accepts_buffer_types(backend):
    data = os.urandom(300)
    want = reference.crc32c(data)
    import mmap

    mm = mmap.mmap(-1, len(data))
    mm.write(data)
    for obj in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8), mm):
        assert backend.framing.crc32c(obj) == want
    mm.close()


def test_hardware_and_table_paths_reported(backend):
    if backend.name != "cython":
        assert backend.framing.crc32c_backend() in ("hardware", "software")
        return
    assert backend.framing.set_crc32c_backend("table") == "table"
    assert backend.framing.crc32c(b"123456789") == 0xE3069283
    hw = backend.framing.set_crc32c_backend("hardware")
    assert hw in ("sse4.2+vpclmulqdq", "sse4.2+pclmul", "sse4.2", "armv8")
    with pytest.raises(tfrecord_lite.InvalidArgumentError):
        backend.framing.set_crc32c_backend("fast")


def test_env_switch_forces_table_path():
    code = "from tfrecord_lite import _native; print(_native.framing.crc32c_backend())"
    env = dict(os.environ, TFRECORD_LITE_CRC32C_TABLE="1")
    env.pop("TFRECORD_LITE_PURE_PYTHON", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "table"
