"""The one place that picks the compiled core or its pure-Python twin.

Each concern (``framing``, ``example``, ``spans``) has a compiled module
``tfrecord_lite._<name>`` built from ``csrc/_<name>.pyx`` and a twin
``tfrecord_lite._<name>_py``. Library code reaches the active one through attributes of this
module (``_native.framing.scan_frames``), looked up at call time, so ``use()`` switches every
caller at once.

``TFRECORD_LITE_PURE_PYTHON=1`` forces the twins. A compiled module that fails to import
falls back to its twin with a warning rather than an error.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings

CONCERNS = ("framing", "example", "spans")
# What framing.check_buffer raises for an object whose bytes cannot be borrowed (not
# bytes-like, not contiguous: numpy says ValueError, memoryview BufferError; object pointers).
BUFFER_ERRORS = (TypeError, BufferError, ValueError)

_compiled: dict = {}
_python: dict = {}  # the twins, imported only when chosen: they need protobuf and crc32c


def _load_python() -> dict:
    for name in CONCERNS:
        if name not in _python:
            _python[name] = importlib.import_module(f"tfrecord_lite._{name}_py")
    return _python

def _load_compiled() -> ImportError | None:
    """Import every compiled module into _compiled, all or none; the error if one fails."""
    try:
        for name in CONCERNS:
            _compiled[name] = importlib.import_module(f"tfrecord_lite._{name}")
    except ImportError as exc:  # a source checkout without a build, or a broken wheel
        _compiled.clear()
        return exc
    return None


if os.environ.get("TFRECORD_LITE_PURE_PYTHON", "") not in ("", "0"):
    implementation = "python"
elif (_import_error := _load_compiled()) is None:
    implementation = "cython"
else:
    implementation = "python"
    warnings.warn(
        f"tfrecord_lite's compiled core could not be imported ({_import_error}); using the much "
        "slower pure-Python implementation. To fix this, install a C compiler and reinstall: "
        "pip install --force-reinstall --no-deps . (from the source checkout), or "
        "pip install --force-reinstall --no-binary tfrecordkit tfrecordkit.",
        RuntimeWarning,
        stacklevel=2,
    )


def available() -> tuple[str, ...]:
    """Backends that can be used in this process."""
    return ("cython", "python") if _compiled or _load_compiled() is None else ("python",)


def _activate(name: str) -> None:
    global implementation
    modules = _compiled if name == "cython" else _load_python()
    if name == "cython" and not modules and _load_compiled() is not None:
        raise RuntimeError("the compiled core is not available in this installation")
    for concern in CONCERNS:
        globals()[concern] = modules[concern]
    implementation = name


@contextlib.contextmanager
def use(name: str):
    """Switch every concern to the "cython" or "python" backend inside the block (tests)."""
    if name not in ("cython", "python"):
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"backend must be 'cython' or 'python', not {name!r}")
    previous = implementation
    _activate(name)
    try:
        yield
    finally:
        _activate(previous)


_activate(implementation)
