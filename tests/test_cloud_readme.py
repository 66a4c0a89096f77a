"""The README's "Cloud and remote paths" snippets run as written, in a fresh empty directory,
against the loopback S3 server (reached through the AWS SDK's environment, as a user's
``AWS_ENDPOINT_URL`` would point at theirs)."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def section_snippets(title):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", section, flags=re.S)


def test_cloud_section_snippets_run_against_the_s3_server(s3_server, tmp_path):
    fs = s3_server.filesystem()
    if fs.exists("my-bucket/data"):
        fs.rm("my-bucket/data", recursive=True)
    snippets = section_snippets("Cloud and remote paths")
    assert len(snippets) == 2 and "s3://" in snippets[0] and "memory://" in snippets[1]
    outputs = []
    for i, code in enumerate(snippets):
        cwd = tmp_path / f"snippet{i}"
        cwd.mkdir()
        env = {**os.environ, **s3_server.env, "PYTHONPATH": ROOT}
        out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout.splitlines())
    assert outputs[0] == ["103", "b'two'"]
    assert outputs[1][0].startswith("['memory://demo/train-00000-of-00003.tfrecord'")
    assert outputs[1][1] == str([b"record %d" % i for i in range(5)])
    assert sorted(os.listdir(tmp_path / "snippet0")) == ["local.tfrecord.gz"]
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[1] for p in fs.find("my-bucket/data")) == [
        "train-0.tfrecord", "train-0.tfrecord.index", "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord"]
