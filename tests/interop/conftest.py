"""TensorFlow-backed interop tests. TensorFlow is a test dependency: when it is missing
these tests fail (they are never skipped), because every format claim rests on them."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="session")
def tf():
    try:
        import tensorflow as tf
    except ImportError as exc:  # pragma: no cover - CI always installs it
        pytest.fail(f"TensorFlow interop tests need tensorflow-cpu installed ({exc}); "
                    "install the test extra: pip install -e '.[test]'")
    return tf


def pytest_collection_modifyitems(items):
    for item in items:
        if "interop" in str(item.fspath):
            item.add_marker(pytest.mark.interop)
