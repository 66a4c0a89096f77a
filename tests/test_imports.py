"""The package's import graph: no module reaches back up to ``tfrecord_lite/__init__.py``,
so each one imports on its own, before the package's public names exist."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

import tfrecord_lite

PACKAGE = pathlib.Path(tfrecord_lite.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
SUBMODULES = {p.name.split(".")[0] for p in PACKAGE.iterdir() if p.suffix in (".py", ".so", ".pyd")}


def test_modules_import_siblings_never_the_package():
    offenders = []
    for name in MODULES:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                offenders += [f"{name}: from . import {a.name}" for a in node.names if a.name not in SUBMODULES]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "tfrecord_lite":
                offenders.append(f"{name}: from tfrecord_lite import ...")
            elif isinstance(node, ast.Import) and any(a.name == "tfrecord_lite" for a in node.names):
                offenders.append(f"{name}: import tfrecord_lite")
    assert not offenders


@pytest.mark.parametrize("name", MODULES)
def test_each_module_imports_before_the_package(name):
    # The package is registered without running its __init__: a module that needs a name
    # from it (or closes an import cycle through it) fails here.
    code = (
        "import importlib, sys, types\n"
        f"pkg = types.ModuleType('tfrecord_lite'); pkg.__path__ = [{str(PACKAGE)!r}]\n"
        "sys.modules['tfrecord_lite'] = pkg\n"
        f"importlib.import_module('tfrecord_lite.{name}')\n"
        "assert not hasattr(pkg, 'TFRecordReader'), 'the package __init__ ran'\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
