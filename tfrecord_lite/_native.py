"""The one place that picks the compiled core or its pure-Python twin.

Each concern (``framing``, ``example``) has a compiled module ``tfrecord_lite._<name>``
built from ``csrc/<name>.pyx`` and a twin ``tfrecord_lite._<name>_py``. Library code reaches
the active one through attributes of this module (``_native.framing.scan_frames``), looked up
at call time, so ``use()`` switches every caller at once.

``TFRECORD_LITE_PURE_PYTHON=1`` forces the twins. A compiled module that fails to import
falls back to its twin with a warning rather than an error.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings

CONCERNS = ("framing", "example")

_compiled: dict = {}
_python: dict = {}
for _name in CONCERNS:
    _python[_name] = importlib.import_module(f"tfrecord_lite._{_name}_py")

_import_error: Exception | None = None
if os.environ.get("TFRECORD_LITE_PURE_PYTHON", "") not in ("", "0"):
    implementation = "python"
else:
    try:
        for _name in CONCERNS:
            _compiled[_name] = importlib.import_module(f"tfrecord_lite._{_name}")
        implementation = "cython"
    except ImportError as exc:  # a source checkout without a build, or a broken wheel
        _import_error = exc
        _compiled.clear()
        implementation = "python"
        warnings.warn(
            f"tfrecord_lite's compiled core could not be imported ({exc}); using the much slower "
            "pure-Python implementation. Reinstall with a C compiler available "
            "(pip install --force-reinstall --no-binary tfrecord_lite tfrecord_lite) to fix this.",
            RuntimeWarning,
            stacklevel=2,
        )


def available() -> tuple[str, ...]:
    """Backends that can be used in this process."""
    return ("cython", "python") if _compiled or _try_compiled() else ("python",)


def _try_compiled() -> bool:
    try:
        for name in CONCERNS:
            _compiled[name] = importlib.import_module(f"tfrecord_lite._{name}")
        return True
    except ImportError:
        _compiled.clear()
        return False


def _activate(name: str) -> None:
    global implementation
    modules = _compiled if name == "cython" else _python
    if name == "cython" and not modules and not _try_compiled():
        raise RuntimeError("the compiled core is not available in this installation")
    for concern in CONCERNS:
        globals()[concern] = modules[concern]
    implementation = name


@contextlib.contextmanager
def use(name: str):
    """Switch every concern to the "cython" or "python" backend inside the block (tests)."""
    if name not in ("cython", "python"):
        raise ValueError(f"backend must be 'cython' or 'python', not {name!r}")
    previous = implementation
    _activate(name)
    try:
        yield
    finally:
        _activate(previous)


_activate(implementation)
