"""Benchmarks for tfrecord_lite.

``generate_data`` builds the workloads (deterministic, under ``benchmarks/data/``),
``_harness`` holds what every comparison shares (peer subprocesses, medians, machine
facts, RESULTS.md sections), and each ``bench_*`` module runs one comparison::

    python -m benchmarks.generate_data
    python -m benchmarks.bench_framing --write-results

Peers (TensorFlow, the ``tfrecord`` package) are pinned in the ``bench`` extra. Each one
runs in its own subprocess, so TensorFlow is never imported next to tfrecord_lite.
"""
