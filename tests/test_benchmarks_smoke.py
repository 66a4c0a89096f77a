"""Smoke-run the benchmark harness end to end on tiny workloads.

Every peer really runs (TensorFlow and the ``tfrecord`` package are in the bench extra and
CI installs both): a missing peer makes these tests fail, not skip.
"""

import math
import os
import sys

import pytest

try:
    import benchmarks  # noqa: F401
except ImportError:  # the repository root is not on sys.path; append it, not shadowing an install
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _harness as H  # noqa: E402
from benchmarks import bench_framing, generate_data  # noqa: E402

SCALE = 0.002  # W1: 8 files x 2-3 records, W2: 400 records


@pytest.fixture(scope="module")
def workloads(tmp_path_factory):
    return generate_data.generate(scale=SCALE, out_dir=str(tmp_path_factory.mktemp("bench-data")))


def test_generated_examples_parse_and_match_deterministic_serialization(workloads):
    from tfrecord_lite import TFRecordReader

    Example = generate_data.example_class()
    for name, w in workloads.items():
        n = 0
        for path in w["paths"]:
            for record in TFRecordReader(path):
                message = Example.FromString(record)
                assert message.SerializeToString(deterministic=True) == record
                n += 1
        assert n == w["records"]
        assert w["bytes"] == sum(os.path.getsize(p) for p in w["paths"])
    first = Example.FromString(next(iter(TFRecordReader(workloads["w2"]["paths"][0]))))
    assert len(first.features.feature) == 18
    assert len(first.features.feature["float_list"].float_list.value) == 32


def test_generate_is_deterministic_and_keeps_existing_files(workloads, tmp_path):
    again = generate_data.generate(scale=SCALE, out_dir=str(tmp_path))
    for name, w in workloads.items():
        for a, b in zip(w["paths"], again[name]["paths"]):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read()
    mtimes = [os.stat(p).st_mtime_ns for w in again.values() for p in w["paths"]]
    generate_data.generate(scale=SCALE, out_dir=str(tmp_path))
    assert [os.stat(p).st_mtime_ns for w in again.values() for p in w["paths"]] == mtimes
    with pytest.raises(ValueError, match="scale"):
        generate_data.generate(scale=SCALE * 2, out_dir=str(tmp_path))


def test_bench_framing_end_to_end(workloads, tmp_path):
    results = bench_framing.run(workloads, repeats=1, warmup=1, out_dir=str(tmp_path / "out"), timeout=600)
    peers = {(op, key) for op, key, *_ in bench_framing.PEERS}
    for name in workloads:
        got = {(m["op"], m["key"]) for m in results["measurements"] if m["workload"] == name}
        assert got == peers
    for m in results["measurements"]:
        assert m["records"] == workloads[m["workload"]]["records"]
        assert len(m["seconds"]) == 1 and len(m["cpu_seconds"]) == 1
        assert m["median_s"] > 0 and m["records_per_s"] > 0 and m["mb_per_s"] > 0
        assert math.isfinite(m["records_per_s"])
        if m["key"].startswith("lite"):
            assert "tensorflow" not in m["imported"] and "tfrecord" not in m["imported"]
            assert m["implementation"] == "cython"
        elif m["key"] == "tf":
            assert "tensorflow" in m["imported"] and "tfrecord_lite" not in m["imported"]
        else:
            assert "tfrecord" in m["imported"] and "tensorflow" not in m["imported"]
    assert len(results["ratios"]) == len(bench_framing.RATIOS) * len(workloads)
    for r in results["ratios"]:
        assert r["ratio"] > 0 and math.isfinite(r["ratio"])
        assert r["met"] is None if r["target"] is None else r["met"] == (r["ratio"] >= r["target"])
    assert not os.path.exists(tmp_path / "out")

    text = bench_framing.report(results)
    assert "| read | tfrecord_lite TFRecordReader |" in text and "### Targets" in text
    results_md = tmp_path / "RESULTS.md"
    H.update_results_section("other", "## Other\n\nkept", path=str(results_md))
    H.update_results_section(bench_framing.SECTION, text, path=str(results_md))
    H.update_results_section(bench_framing.SECTION, text.replace("Framing", "Framing again"), path=str(results_md))
    content = results_md.read_text()
    assert content.count("<!-- begin bench_framing -->") == 1 and "Framing again" in content
    assert "## Other\n\nkept" in content


def test_peer_failure_is_an_error_not_a_skip():
    with pytest.raises(H.PeerError, match="No module named"):
        H.run_in_subprocess("benchmarks.no_such_module:main", {})
