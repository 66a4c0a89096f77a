"""Shared fixtures: the backend switch.

Exceptions swallowed inside compiled code ("Exception ignored in ...") or in threads are
turned into test failures by the filterwarnings setting in pyproject.toml."""

import gc
import os

import pytest
from hypothesis import HealthCheck, settings

from tfrecord_lite import _native, release_memory

# The backend fixture only switches modules, so sharing it across generated inputs is safe.
settings.register_profile("default", suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
settings.load_profile("default")

BACKENDS = _native.available()


class Backend:
    """The active backend's modules, switched for the duration of a test."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, concern):
        if concern in _native.CONCERNS:
            return getattr(_native, concern)
        raise AttributeError(concern)

    def __repr__(self):
        return f"Backend({self.name!r})"

    @property
    def other(self):
        """The other backend's name: parity tests compute with it under _native.use()."""
        return "python" if self.name == "cython" else "cython"


@pytest.fixture(params=["cython", "python"])
def backend(request):
    """Runs the test once per backend; library calls inside it go to that backend."""
    if request.param not in BACKENDS:
        pytest.fail("the compiled core is not built; run `pip install .` (or build_ext --inplace)")
    with _native.use(request.param):
        assert _native.implementation == request.param
        yield Backend(request.param)


@pytest.fixture
def core():
    """The compiled decoder module, with nothing the library keeps for reuse left by earlier
    tests (release_memory): no kept blocks (the encoder keeps its scratch there too), no kept
    bytes objects, no shared read buffers."""
    if "cython" not in BACKENDS:
        pytest.fail("the compiled core is not built; run `pip install .` (or build_ext --inplace)")
    with _native.use("cython"):
        gc.collect()
        release_memory()
        yield _native.example


@pytest.fixture
def few_descriptors():
    """The process may open only 40 more files than it has open now (restored afterwards):
    far fewer than the 200 shards the tests that take this write."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/dev/fd")) + 40, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# The loopback S3 server (moto) and memory:// prefixes for the remote-path tests.
from tests._s3 import memfs, s3, s3_reads, s3_server, s3_versioned  # noqa: E402,F401
