"""Progress bars: the one place that decides whether to show one.

``progress(enabled=None)`` shows a tqdm bar on stderr when stderr is a terminal, never
otherwise (logs, pipes, CI stay clean); ``enabled=True`` forces it on and ``enabled=False``
off. Every long-running operation (sharded writes, merge, split, the CLI's count and verify,
dataset exports) takes a ``progress`` argument and passes it here unchanged.
"""

from __future__ import annotations

import sys

__all__ = ["progress", "is_enabled"]


def is_enabled(flag=None) -> bool:
    """Resolve a ``progress`` argument: None means "if stderr is a terminal"."""
    if flag is None:
        try:
            return sys.stderr is not None and sys.stderr.isatty()
        except (AttributeError, ValueError):  # replaced or closed stderr
            return False
    return bool(flag)


def progress(total=None, desc=None, enabled=None, unit="rec", **kwargs):
    """A tqdm bar (or a silent stand-in with the same ``update``/``close``/``with`` surface).

    unit="B" scales to kB/MB/GB. Extra keyword arguments go to tqdm."""
    if not is_enabled(enabled):
        return _Silent()
    from tqdm import tqdm

    if unit == "B":
        kwargs.setdefault("unit_scale", True)
        kwargs.setdefault("unit_divisor", 1024)
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                leave=False, **kwargs)


class _Silent:
    """What progress() returns when no bar is shown: every call is a no-op."""

    n = 0
    total = None

    def update(self, n=1):
        pass

    def set_postfix_str(self, *args, **kwargs):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
