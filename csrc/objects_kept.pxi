# Included by each module that makes bytes objects through objects.pxd (_example, _spans):
# each keeps its own pool and ring (objects.pxd's module-level state), seen and dropped here.

def _pool_kept():
    """(objects, bytes) this module's pool of long values' bytes objects holds: for tests."""
    return pool_count, pool_bytes


def _short_kept():
    """Objects this module's ring of short values' bytes objects holds: for tests."""
    return short_count


def _pool_clear():
    """Drop this module's pool and ring of bytes objects (tfrecord_lite.release_memory)."""
    pool_clear()
    short_clear()
