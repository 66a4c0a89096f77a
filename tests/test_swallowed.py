"""The suite's guard against swallowed exceptions really fails tests."""

import subprocess
import sys
import textwrap


def test_unraisable_exception_fails_a_test(tmp_path):
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        class Bad:
            def __del__(self):
                raise RuntimeError("swallowed")

        def test_gc():
            Bad()
    """))
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-c", os.path.join(root, "pyproject.toml"), "--rootdir", str(tmp_path),
                          str(tmp_path / "test_x.py")], capture_output=True, text=True)
    assert out.returncode == 1, out.stdout
    assert "swallowed" in out.stdout
