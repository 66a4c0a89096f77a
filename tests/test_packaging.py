"""Packaging: what a wheel and an sdist of this checkout contain, and how they install.

The builds run on a copy of the source tree (generated csrc/*.c included, so Cython does not
run again), with the build dependencies of this environment (--no-build-isolation).
"""

import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_NAME = "tfrecordkit"
_SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so",
                               ".hypothesis", ".pytest_cache", "data")


def _build_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TFRECORD_LITE_DEBUG", "TFRECORD_LITE_SANITIZE", "PYTHONPATH")}
    env.update(extra)
    return env


def _run(cmd, cwd, env):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _build_wheel(tmp_path, name, **env):
    src = tmp_path / f"src-{name}"
    shutil.copytree(ROOT, src, ignore=_SKIP)
    out = tmp_path / f"wheel-{name}"
    done = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                 "-w", str(out), str(src)], tmp_path, _build_env(**env))
    (wheel,) = out.glob("*.whl")
    return wheel, done.stdout + done.stderr


def _import_installed(tmp_path, wheel):
    """Install the wheel into a fresh target directory; import it from there in a subprocess."""
    site = tmp_path / f"site-{wheel.stem}"
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
          str(wheel)], tmp_path, _build_env())
    # An editable install of the checkout (CI's) adds a meta path finder that would find the
    # checkout's compiled modules beside the wheel's package: drop it, as a plain install has none.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if not str(getattr(f, '__module__', '')).startswith('__editable__')]; "
            "import tfrecord_lite as t, os; "
            "assert os.path.dirname(t.__file__).startswith(os.environ['PYTHONPATH']), t.__file__; "
            "assert all((m.__file__ or '').startswith(os.environ['PYTHONPATH']) "
            "for n, m in list(sys.modules.items()) if n.startswith('tfrecord_lite.')), 'mixed install'; "
            "w = t.TFRecordWriter('x.tfrecord'); w.write(b'abc'); w.close(); "
            "print(t.implementation, list(t.TFRecordReader('x.tfrecord')))")
    return _run([sys.executable, "-c", code], tmp_path, _build_env(PYTHONPATH=str(site)))


def _elf_section_names(data: bytes):
    """Section names of a 64-bit little-endian ELF file (the Linux extension modules)."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit LE ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, str_off, str_size = section(shstrndx)
    strtab = data[str_off:str_off + str_size]
    return {strtab[n:strtab.index(b"\0", n)].decode() for n, _, _ in map(section, range(shnum))}


def test_elf_section_names_sees_debug_info(tmp_path):
    """The parser below finds .debug_info when it is there (so the strip test can fail)."""
    src = tmp_path / "m.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    _run(["cc", "-g", "-c", str(src), "-o", str(tmp_path / "m.o")], tmp_path, _build_env())
    assert ".debug_info" in _elf_section_names((tmp_path / "m.o").read_bytes())


def test_release_wheel_is_named_licensed_typed_and_stripped(tmp_path):
    wheel, _ = _build_wheel(tmp_path, "release")
    assert wheel.name.startswith(f"{DIST_NAME}-0.1.0-")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(f"{DIST_NAME}-0.1.0.dist-info/METADATA").decode()
        modules = {n: z.read(n) for n in names if n.endswith(".so")}
        license_text = z.read(f"{DIST_NAME}-0.1.0.dist-info/licenses/LICENSE").decode()
    assert f"Name: {DIST_NAME}\n" in meta and "License-Expression: Apache-2.0\n" in meta
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "tfrecord_lite/py.typed" in names
    assert sorted(os.path.basename(n).split(".")[0] for n in modules) == ["_example", "_framing", "_spans"]
    for name, data in modules.items():
        sections = _elf_section_names(data)
        assert ".text" in sections, name
        assert not {s for s in sections if s.startswith(".debug")}, f"{name} carries debug info"

    done = _import_installed(tmp_path, wheel)
    assert done.stdout.split(" ", 1) == ["cython", "[b'abc']\n"]


def test_no_compiler_installs_the_pure_python_package_with_a_warning(tmp_path):
    wheel, log = _build_wheel(tmp_path, "nocc", CC="/bin/false", CXX="/bin/false")
    assert "compiled core could not be built" in log
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert "tfrecord_lite/_framing_py.py" in names and "tfrecord_lite/example.proto" in names

    done = _import_installed(tmp_path, wheel)
    assert done.stdout.split(" ", 1) == ["python", "[b'abc']\n"]
    # The import warning tells the user how to reinstall THIS project, not the PyPI namesake.
    assert "pure-Python implementation" in done.stderr
    assert f"--no-binary {DIST_NAME} {DIST_NAME}" in done.stderr
    assert "tfrecord_lite tfrecord_lite" not in done.stderr


def test_sdist_ships_license_sources_and_py_typed(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_SKIP)
    out = tmp_path / "sdist"
    code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
    name = _run([sys.executable, "-c", code], src, _build_env()).stdout.split()[-1]
    assert name == f"{DIST_NAME}-0.1.0.tar.gz"
    with tarfile.open(out / name) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "tfrecord_lite/py.typed", "csrc/_framing.pyx", "csrc/_example.pyx", "csrc/_spans.pyx",
            "csrc/crc32c.c", "csrc/crc32c.h", "csrc/cursor.pxd", "setup.py", "pyproject.toml"} <= names
