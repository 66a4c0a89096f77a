"""Smoke run of benchmarks/bench_dataset.py: data generation and the tfrecord_lite peer."""

import json
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "bench_dataset.py")


def test_bench_dataset_lite_peer(tmp_path):
    data = str(tmp_path / "data")
    subprocess.run([sys.executable, BENCH, "--data", data, "--generate", "--quick"], check=True)
    for workload in ("W2", "DIR"):
        out = subprocess.run([sys.executable, BENCH, "--data", data, "--peer", "lite2", "--workload", workload],
                             check=True, capture_output=True, text=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["records"] == {"W2": 20_000, "DIR": 4_000}[workload]
