"""Build the compiled core: the Cython extension list and its build switches.

Environment switches:
  TFRECORD_LITE_DEBUG=1     -O0 -g, Cython bounds/wraparound checks and the encoders' end checks
  TFRECORD_LITE_SANITIZE=1  build with AddressSanitizer/UBSan
  TFRECORD_LITE_COVERAGE=1  Cython line tracing (linetrace, CYTHON_TRACE_NOGIL), so that
                            coverage.py with Cython.Coverage measures the .pyx lines
Release builds (no switch) carry no debug information.

The extension is optional: without a working C compiler the build warns and installs the
pure-Python package, which tfrecord_lite selects at import (with its own warning).
"""
import os
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

DEBUG = os.environ.get("TFRECORD_LITE_DEBUG") == "1"
SANITIZE = os.environ.get("TFRECORD_LITE_SANITIZE") == "1"
COVERAGE = os.environ.get("TFRECORD_LITE_COVERAGE") == "1"

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
link_args = []
if not (DEBUG or SANITIZE):
    compile_args.append("-g0")  # after Python's own CFLAGS (which carry -g), so it wins
    if sys.platform.startswith("linux"):
        link_args.append("-Wl,--strip-debug")
if SANITIZE:
    compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    link_args += ["-fsanitize=address,undefined"]
if sys.platform == "win32":
    compile_args = ["/O2"]

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": True,
    "initializedcheck": DEBUG,
    "embedsignature": True,
    "binding": True,  # def functions carry signatures: inspect.signature compares them with the twins'
    "linetrace": COVERAGE,
}
define_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if COVERAGE:
    # The core runs without the GIL, so nogil sections must be traced too.
    define_macros.append(("CYTHON_TRACE_NOGIL", "1"))

# C sources linked into one extension only: _framing owns CRC32C and its backend state, and
# the SIGBUS handler of guarded reads; the other modules borrow tfl_crc32c and the guard from
# it (capsules), so there is one backend choice and one handler.
C_SOURCES = {"_framing": ["csrc/crc32c.c", "csrc/guard.c"]}
if DEBUG:
    define_macros.append(("TFL_DEBUG", "1"))  # encoders check they end where their size pass said


def extension(pyx):
    name = os.path.splitext(os.path.basename(pyx))[0]  # csrc/_framing.pyx builds tfrecord_lite._framing
    return Extension(
        f"tfrecord_lite.{name}",
        sources=[pyx] + C_SOURCES.get(name, []),
        include_dirs=["csrc", numpy.get_include()],
        define_macros=define_macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )


_BUILD_ERRORS = (CCompilerError, BaseError, OSError)


class optional_build_ext(build_ext):
    """build_ext that warns and leaves the pure-Python package when compiling fails."""

    def run(self):
        try:
            super().run()
        except _BUILD_ERRORS as exc:  # no compiler, no Python headers, CC=/bin/false
            self._warn(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except _BUILD_ERRORS as exc:
            self._warn(exc)

    def _warn(self, exc):
        sys.stderr.write(
            "\n" + "*" * 78 + "\n"
            f"WARNING: tfrecord_lite's compiled core could not be built ({exc}).\n"
            "Installing the pure-Python implementation, which is much slower. Install a C\n"
            "compiler and the Python headers, then reinstall, to get the compiled core.\n"
            + "*" * 78 + "\n\n"
        )


setup(
    cmdclass={"build_ext": optional_build_ext},
    ext_modules=cythonize(
        [extension(p) for p in sorted(glob("csrc/*.pyx"))],
        compiler_directives=directives,
        include_path=["csrc"],
        # Traced C goes elsewhere, so switching COVERAGE never reuses the other kind.
        build_dir="build/cython-coverage" if COVERAGE else None,
    ),
)
