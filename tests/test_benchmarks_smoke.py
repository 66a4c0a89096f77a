"""Smoke-run every benchmark end to end on tiny workloads.

Every peer really runs (TensorFlow, the ``tfrecord`` package and torch are in the bench
extra and CI installs them): a missing peer makes these tests fail, not skip.
"""

import argparse
import math
import os
import sys

import pytest

try:
    import benchmarks  # noqa: F401
except ImportError:  # the repository root is not on sys.path; append it, not shadowing an install
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _harness as H  # noqa: E402
from benchmarks import __main__ as run_all  # noqa: E402
from benchmarks import (bench_arrow, bench_cloud, bench_dataset, bench_example, bench_framing, bench_ray,  # noqa: E402
                        bench_scaling, bench_to_npy, bench_write, generate_data)

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


def test_w2_columns_encode_to_the_w2_file(workloads):
    from tfrecord_lite import TFRecordReader, encode_examples, parse_example

    cols = generate_data.w2_columns(workloads["w2"]["records"])
    records = list(TFRecordReader(workloads["w2"]["paths"][0]))
    assert [bytes(r) for r in encode_examples(cols, deterministic=True)] == records
    parsed = parse_example(records, generate_data.lite_features("w2"))
    assert sorted(parsed) == sorted(generate_data.SPECS["w2"]) == sorted(cols)
    for k in cols:
        assert list(parsed[k].reshape(len(records), -1).tolist()) == list(cols[k].reshape(len(records), -1).tolist())


def _check(results, module, tmp_path, peers_per_workload):
    """What every bench_* run must give: each expected peer measured once per workload, with
    positive finite rates, in the right process; ratios computed; a report with a targets
    table; its own RESULTS.md section."""
    ms = results["measurements"]
    for workload, keys in peers_per_workload.items():
        got = sorted(m["key"] for m in ms if m["workload"] == workload)
        assert got == sorted(keys), workload
    for m in ms:
        assert m["median_s"] > 0 and len(m["seconds"]) == 1
        assert m["records_per_s"] > 0 and math.isfinite(m["records_per_s"])
        assert m["mb_per_s"] > 0 and math.isfinite(m["mb_per_s"])
        if m["key"].startswith("lite"):
            assert "tensorflow" not in m["imported"] and "tfrecord" not in m["imported"]
            assert m["implementation"] == "cython"
        elif m["key"] == "tf":
            imported = m.get("imported_in_workers", m["imported"])  # a process pool's workers
            assert "tensorflow" in imported and "tfrecord_lite" not in imported
        elif m["key"] == "tfrecord":
            assert "tfrecord" in m["imported"] and "tensorflow" not in m["imported"]
    assert results["ratios"]
    for r in results["ratios"]:
        assert r["ratio"] > 0 and math.isfinite(r["ratio"])
        assert r["met"] is None if r["target"] is None else r["met"] == (r["ratio"] >= r["target"])
    targets = [r for r in results["ratios"] if r["target"] is not None]
    assert targets

    text = module.report(results)
    assert "### Targets" in text and "| workload | measurement | ratio | measured | target | met |" in text
    for r in targets:
        assert f"| {r['ratio']:.2f}x | >= {r['target']:g}x | {'yes' if r['met'] else '**no**'} |" in text
    if any(m["key"] == "tf" for m in ms):
        assert "vs TF" in text or "vs tf.data" in text
    results_md = tmp_path / "RESULTS.md"
    H.update_results_section("other", "## Other\n\nkept", path=str(results_md))
    H.update_results_section(module.SECTION, text, path=str(results_md))
    H.update_results_section(module.SECTION, text, path=str(results_md))
    content = results_md.read_text()
    assert content.count(f"<!-- begin {module.SECTION} -->") == 1 and "## Other\n\nkept" in content
    return text


def test_bench_example_end_to_end(workloads, tmp_path):
    results = bench_example.run(workloads, repeats=1, warmup=1, out_dir=str(tmp_path / "out"), timeout=600)
    text = _check(results, bench_example, tmp_path, {"w1": ["lite", "tf", "tfrecord"],
                                                      "w2": ["lite", "tf", "tfrecord", "lite_columns", "lite_rows",
                                                             "tf"]})
    assert {r["what"] for r in results["ratios"] if r["target"]} == {"parse", "encode+write"}
    for m in results["measurements"]:
        assert m["records"] == workloads[m["workload"]]["records"]
    assert "encode_examples (columnar)" in text and "encode_example (per row)" in text
    assert not os.path.exists(tmp_path / "out")


def test_bench_dataset_end_to_end(workloads, tmp_path):
    many = generate_data.generate_many_files(SCALE, os.path.dirname(os.path.dirname(workloads["w2"]["paths"][0])))
    assert len(many["paths"]) == generate_data.MANY_FILES and many["records"] == generate_data.MANY_FILES
    results = bench_dataset.run(workloads, many, repeats=1, warmup=1, timeout=600)
    lite = ["lite1", "lite2", "lite1t", "lite2t"]
    text = _check(results, bench_dataset, tmp_path, {"w1": lite + ["tf", "tfrecord"], "w2": lite + ["tf", "tfrecord"],
                                                      "many": lite + ["tf"]})
    for m in results["measurements"]:
        assert m["peak_rss_mb"] > 0
    scaling = [r for r in results["ratios"] if r["workload"] == "w2" and r["what"].startswith("scaling")]
    assert [r["target"] for r in scaling] == [bench_dataset.SCALING_TARGET] * 2
    assert "taking turns" in scaling[1]["what"] and "1 thread taking turns with 2" in scaling[1]["denominator"]
    assert "peak RSS MB" in text and "### MANY" in text


def test_bench_write_end_to_end(workloads, tmp_path):
    results = bench_write.run(workloads, repeats=1, warmup=1, out_dir=str(tmp_path / "out"), timeout=600)
    ops = {m["op"] for m in results["measurements"]}
    assert ops == {"write, 1 worker", "write, 2 workers", f"merge {bench_write.SHARDS} shards"}
    _check(results, bench_write, tmp_path, {"w2": ["lite", "tf", "lite", "tf", "lite", "lite_verify", "tf"]})
    for m in results["measurements"]:
        assert m["bytes_written"] == workloads["w2"]["bytes"]
    assert not os.path.exists(tmp_path / "out")


def test_bench_to_npy_end_to_end(tmp_path):
    workload = bench_to_npy.generate(0.01, str(tmp_path / "data"))
    results = bench_to_npy.run(workload, 1, str(tmp_path / "out"))
    (run,) = results["runs"]
    assert run["written_bytes"] == workload["records"] * (64 * 256 * 4 + 8)
    assert run["seconds"] > 0 and 0 < run["start_rss_mb"] <= run["peak_rss_mb"]
    text = bench_to_npy.report(results)
    assert "| bound | met |" in text and f"<= {bench_to_npy.BOUND_MB} MB" in text
    assert not os.path.exists(tmp_path / "out")


def test_bench_scaling_end_to_end(tmp_path):
    workloads = bench_scaling.generate(0.002, str(tmp_path / "data"))
    assert [w["records"] for w in workloads.values()] == [200 * bench_scaling.FILES, 2 * bench_scaling.FILES]
    results = bench_scaling.run(workloads, cpus=2, repeats=1, warmup=0, timeout=600, gil=True)
    got = {(r["workload"], r["sweep"], r["variant"], r["n"]) for r in results["rows"]}
    for w in ("w1", "w2"):
        for sweep in ("raw", "parse"):
            for variant in bench_scaling.VARIANTS:
                assert {(w, sweep, variant, 1), (w, sweep, variant, 2)} <= got
        assert {(w, "loader", "defaults", 0), (w, "loader", "defaults", 2), (w, "reference", "defaults", 2)} <= got
    assert (("w2", "write", "defaults", 2) in got) and not any(k[1] == "write" and k[0] == "w1" for k in got)
    for r in results["rows"]:
        assert r["records_per_s"] > 0 and math.isfinite(r["records_per_s"])
        base = 0 if r["sweep"] == "loader" else 1
        assert (r["vs_1"] == 1.0) if r["n"] == base else r["vs_1"] > 0
    assert {t["what"] for t in results["targets"]} >= {"parse defaults, n=2 / n=1", "loader defaults, n=2 / n=0",
                                                         "write defaults, n=2 / n=1"}
    for t in results["targets"]:
        assert t["met"] == (t["ratio"] >= t["target"])
    stages = {*bench_scaling.GIL_STAGES.values(), bench_scaling.CONSUMER_STAGE, bench_scaling.OTHER_STAGE}
    for g in results["gil"]:  # measured by py-spy: some of the work holds the GIL, not all of it
        assert 0 < g["gil_ms"] < g["cpu_ms"] and 0 < g["share"] < 1
        # Every GIL-held sample is in exactly one stage.
        assert set(g["by_stage"]) <= stages and math.isclose(sum(g["by_stage"].values()), g["gil_ms"])
    assert [(g["bytes_output"], g["threads"]) for g in results["gil"]] == [
        ("object", 1), ("object", 2), ("column", 1), ("column", 2)]
    ceilings = bench_scaling._loader_ceilings(results["rows"])
    assert {(c["workload"], c["variant"], c["n"]) for c in ceilings} >= {("w1", "defaults", 2), ("w2", "defaults", 2)}
    for c in ceilings:  # the main process's CPU is measured, and some is always spent per batch
        assert c["cpu_ms"] > 0 and c["ceiling"] == c["base_ms"] / c["cpu_ms"]
    text = bench_scaling.report(results)
    assert "### GIL share" in text and "| column | 2 |" in text
    assert "GIL held by stage" in text and "| the decoder's call |" in text
    assert "### DataLoader: the main process's CPU per batch" in text and "| W2 | defaults | 2 |" in text
    assert "### Targets" in text and "| loader | defaults | 2 |" in text
    assert bench_scaling.counts(12) == [1, 2, 4, 8, 12] and bench_scaling.counts(2, workers=True) == [0, 2]
    assert results["section"] == "bench_scaling_2cpu"


def test_bench_scaling_variants_and_sections(tmp_path, monkeypatch):
    workloads = bench_scaling.generate(0.002, str(tmp_path / "data"))
    results = bench_scaling.run(workloads, cpus=2, repeats=1, warmup=0, timeout=600, sweeps=("parse", "loader"),
                                variants={"block_length=1024", "fresh workers"})
    assert {(r["sweep"], r["variant"]) for r in results["rows"]} == {("parse", "block_length=1024"),
                                                                      ("loader", "fresh workers")}
    # Each core count has its own RESULTS.md section; another machine's is left alone.
    path = tmp_path / "RESULTS.md"
    monkeypatch.setattr(H, "RESULTS_PATH", str(path))
    args = argparse.Namespace(json=None, write_results=True)
    for cpus in (2, 16):
        H.finish(args, bench_scaling.SECTION, {"section": bench_scaling.section(cpus)}, f"figures on {cpus} cores\n")
    H.finish(args, bench_scaling.SECTION, {"section": bench_scaling.section(2)}, "new 2-core figures\n")
    text = path.read_text()
    assert "new 2-core figures" in text and "figures on 16 cores" in text and "figures on 2 cores" not in text


def test_bench_cloud_end_to_end(workloads, tmp_path):
    results = bench_cloud.run(workloads, repeats=1, warmup=1, timeout=600)
    text = _check(results, bench_cloud, tmp_path, {"w1": ["lite", "lite_s3", "s3fs"]})
    assert [r["target"] for r in results["ratios"]] == [bench_cloud.TARGET, None]
    assert "s3:// on loopback" in text and "vs local" in text


def test_bench_arrow_end_to_end(workloads, tmp_path):
    results = bench_arrow.run(workloads, repeats=1, warmup=1, timeout=600)
    ms = results["measurements"]
    assert sorted(m["key"] for m in ms) == sorted(key for key, *_ in bench_arrow.PEERS)
    for m in ms:
        assert m["records"] == workloads["w2"]["records"] and len(m["seconds"]) == 1
        assert m["records_per_s"] > 0 and math.isfinite(m["records_per_s"])
        assert m["implementation"] == "cython" and "tensorflow" not in m["imported"]
    assert [r["target"] for r in results["ratios"]] == [bench_arrow.NUMPY_TARGET, bench_arrow.PYDICT_TARGET]
    for r in results["ratios"]:
        assert r["ratio"] > 0 and r["met"] == (r["ratio"] >= r["target"])
    text = bench_arrow.report(results)
    assert "vs parse_example" in text and "vs from_pydict" in text and "### Targets" in text
    for r in results["ratios"]:
        assert f"| {r['ratio']:.2f}x | >= {r['target']:g}x |" in text
    results_md = tmp_path / "RESULTS.md"
    H.update_results_section(bench_arrow.SECTION, text, path=str(results_md))
    assert results_md.read_text().count("<!-- begin bench_arrow -->") == 1


def test_bench_ray_end_to_end(workloads, tmp_path):
    results = bench_ray.run(workloads, repeats=1, warmup=1, timeout=600)
    text = _check(results, bench_ray, tmp_path, {"w2": ["lite", "lite_indexed", "ray"]})
    assert [r["target"] for r in results["ratios"]] == [bench_ray.TARGET, None]
    assert "ray.data.read_tfrecords (TensorFlow)" in text and "vs Ray's own" in text



def test_run_all_knows_every_benchmark(capsys):
    for name in run_all.BENCHMARKS:
        module = getattr(sys.modules[__name__], f"bench_{name}")
        assert callable(module.main) and callable(module.run) and callable(module.report) and module.SECTION
    with pytest.raises(SystemExit):
        run_all.main(["--only", "framing,nope"])
    assert "unknown benchmark" in capsys.readouterr().err


def test_peer_failure_is_an_error_not_a_skip():
    with pytest.raises(H.PeerError, match="No module named"):
        H.run_in_subprocess("benchmarks.no_such_module:main", {})
