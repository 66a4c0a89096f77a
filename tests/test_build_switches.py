"""setup.py's build switches: TFRECORD_LITE_COVERAGE=1 turns on Cython line tracing.

setup.py runs in a copy of the tree (without _example.pyx, the slow one to translate) with
setuptools.setup replaced by a function that reports the extensions, so the real
cythonize step runs but nothing is compiled."""

import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORT = """
import json, setuptools
setuptools.setup = lambda **kw: print(json.dumps(
    [[e.name, e.sources, e.define_macros] for e in kw["ext_modules"]]))
exec(compile(open("setup.py").read(), "setup.py", "exec"))
"""


def configure(tree, **switches):
    """{extension name: (generated C text, define_macros)} as setup.py configures them."""
    os.makedirs(tree / "csrc")
    shutil.copy(os.path.join(ROOT, "setup.py"), tree)
    for name in os.listdir(os.path.join(ROOT, "csrc")):  # all _framing needs: its .pyx and .pxi, every .pxd, C and header
        if name == "_framing.pyx" or name.startswith("_framing_") and name.endswith(".pxi") \
                or name.endswith((".pxd", ".h")) or name in ("crc32c.c", "guard.c"):
            shutil.copy(os.path.join(ROOT, "csrc", name), tree / "csrc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFRECORD_LITE_")}
    env.update(switches)
    out = subprocess.run([sys.executable, "-c", REPORT], cwd=tree, env=env, capture_output=True,
                         text=True, check=True).stdout
    exts = json.loads(out.strip().splitlines()[-1])
    return {name: ((tree / sources[0]).read_text(), [tuple(m) for m in macros]) for name, sources, macros in exts}


def test_coverage_switch_enables_line_tracing(tmp_path):
    traced, macros = configure(tmp_path / "coverage", TFRECORD_LITE_COVERAGE="1")["tfrecord_lite._framing"]
    assert ("CYTHON_TRACE_NOGIL", "1") in macros
    assert "__Pyx_TraceLine" in traced          # linetrace: a trace call per source line
    plain, macros = configure(tmp_path / "plain")["tfrecord_lite._framing"]
    assert not any(name.startswith("CYTHON_TRACE") for name, _ in macros)
    assert "__Pyx_TraceLine" not in plain
    # The traced C lives apart from the normal build's, so neither is reused for the other.
    assert (tmp_path / "coverage" / "build" / "cython-coverage" / "csrc" / "_framing.c").exists()
    assert not (tmp_path / "coverage" / "csrc" / "_framing.c").exists()


def test_debug_switch_turns_on_the_encoders_end_check(tmp_path):
    """TFRECORD_LITE_DEBUG=1 defines TFL_DEBUG, under which the encoders abort when they end
    anywhere but where their size pass said (tfl_check_end in csrc/wire.pxd)."""
    _, macros = configure(tmp_path / "debug", TFRECORD_LITE_DEBUG="1")["tfrecord_lite._framing"]
    assert ("TFL_DEBUG", "1") in macros
    _, macros = configure(tmp_path / "release")["tfrecord_lite._framing"]
    assert not any(name == "TFL_DEBUG" for name, _ in macros)
