"""Build the compiled core: the Cython extension list and its build switches.

Environment switches:
  TFRECORD_LITE_DEBUG=1     -O0 -g and Cython bounds/wraparound checks on
  TFRECORD_LITE_SANITIZE=1  build with AddressSanitizer/UBSan
  TFRECORD_LITE_COVERAGE=1  Cython line tracing (linetrace, CYTHON_TRACE_NOGIL), so that
                            coverage.py with Cython.Coverage measures the .pyx lines
"""
import os
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("TFRECORD_LITE_DEBUG") == "1"
SANITIZE = os.environ.get("TFRECORD_LITE_SANITIZE") == "1"
COVERAGE = os.environ.get("TFRECORD_LITE_COVERAGE") == "1"

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
link_args = []
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
    "linetrace": COVERAGE,
}
define_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if COVERAGE:
    # The core runs without the GIL, so nogil sections must be traced too.
    define_macros.append(("CYTHON_TRACE_NOGIL", "1"))

C_SOURCES = ["csrc/crc32c.c"]


def extension(pyx):
    name = os.path.splitext(os.path.basename(pyx))[0]
    return Extension(
        f"tfrecord_lite._{name}",
        sources=[pyx] + C_SOURCES,
        include_dirs=["csrc", numpy.get_include()],
        define_macros=define_macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )


setup(
    ext_modules=cythonize(
        [extension(p) for p in sorted(glob("csrc/*.pyx"))],
        compiler_directives=directives,
        include_path=["csrc"],
        # Traced C goes elsewhere, so switching COVERAGE never reuses the other kind.
        build_dir="build/cython-coverage" if COVERAGE else None,
    ),
)
