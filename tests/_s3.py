"""A real S3 API server for the tests: moto's server mode on loopback, reached through s3fs.

``s3_server`` (session) starts it on 127.0.0.1 on a free port, points the AWS SDK at it
through the environment (``AWS_ENDPOINT_URL`` and fake credentials), so plain ``s3://``
URLs work in tests, subprocesses and README snippets alike, and creates the bucket
``my-bucket``. ``s3`` (per test) hands each test its own empty prefix in that bucket;
``s3_versioned`` one in a bucket with versioning."""

from __future__ import annotations

import os
import uuid

import pytest

BUCKET = "my-bucket"
VERSIONED_BUCKET = "versioned-bucket"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


class S3Server:
    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.env = {"AWS_ENDPOINT_URL": endpoint, **CREDENTIALS}
        # The same settings as storage_options, for code that must not rely on the environment.
        self.storage_options = {"key": "testing", "secret": "testing",
                                "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options)


class S3Prefix:
    """One test's prefix: ``url(name)`` is ``s3://my-bucket/<unique>/name``."""

    def __init__(self, server, prefix):
        self.server = server
        self.prefix = prefix
        self.storage_options = server.storage_options
        self.fs = server.filesystem()

    def url(self, name=""):
        return f"s3://{self.prefix}/{name}" if name else f"s3://{self.prefix}"

    def put(self, name, data: bytes) -> str:
        self.fs.pipe_file(f"{self.prefix}/{name}", data)
        return self.url(name)

    def get(self, name) -> bytes:
        return self.fs.cat_file(f"{self.prefix}/{name}")

    def ls(self):
        """Names under the prefix (hidden ones too), sorted."""
        self.fs.invalidate_cache()
        return sorted(p.rsplit("/", 1)[1] for p in self.fs.find(self.prefix))

    def version(self, name) -> str:
        """The current version id of an object (in a bucket with versioning)."""
        bucket, key = f"{self.prefix}/{name}".split("/", 1)
        return self.fs.call_s3("head_object", Bucket=bucket, Key=key)["VersionId"]

    def multipart_uploads(self):
        """Uploads begun and neither completed nor aborted under the prefix."""
        client = self.fs.call_s3  # s3fs's synchronous wrapper around the real client
        out = client("list_multipart_uploads", Bucket=BUCKET, Prefix=self.prefix.split("/", 1)[1])
        return out.get("Uploads", [])


@pytest.fixture(scope="session")
def s3_server():
    """Start moto's S3 server on loopback for the session and point the AWS SDK at it."""
    from moto.server import ThreadedMotoServer
    import s3fs

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s = S3Server(f"http://{host}:{port}")
    saved = {k: os.environ.get(k) for k in s.env}
    os.environ.update(s.env)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        s.filesystem().call_s3("create_bucket", Bucket=BUCKET)
        yield s
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


@pytest.fixture
def s3(s3_server, request):
    """A fresh prefix in the test bucket for one test."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:40]
    return S3Prefix(s3_server, f"{BUCKET}/{name}-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def s3_versioned(s3_server, request):
    """A fresh prefix in a second bucket, one with versioning enabled."""
    fs = s3_server.filesystem()
    if not fs.exists(VERSIONED_BUCKET):
        fs.call_s3("create_bucket", Bucket=VERSIONED_BUCKET)
        fs.call_s3("put_bucket_versioning", Bucket=VERSIONED_BUCKET,
                   VersioningConfiguration={"Status": "Enabled"})
    return S3Prefix(s3_server, f"{VERSIONED_BUCKET}/{uuid.uuid4().hex[:12]}")


@pytest.fixture
def memfs():
    """A fresh memory:// prefix (fsspec's in-process filesystem), removed after the test."""
    import fsspec

    fs = fsspec.filesystem("memory")
    prefix = f"/t-{uuid.uuid4().hex[:12]}"
    yield type("MemPrefix", (), {"fs": fs, "prefix": prefix,
                                 "url": staticmethod(lambda name="": f"memory://{prefix}/{name}".rstrip("/"))})
    if fs.exists(prefix):
        fs.rm(prefix, recursive=True)


@pytest.fixture(params=["signed", "ranged"])
def s3_reads(request, monkeypatch):
    """Both ways an s3:// input is read: one presigned GET streamed into the reader
    (SignedStream), or fsspec's ranged blocks (settings a presigned URL cannot carry)."""
    from tfrecord_lite import fs

    if request.param == "ranged":
        monkeypatch.setattr(fs, "_signs_urls", lambda filesystem: False)
    return request.param
