"""Benchmarks for tfrecord_lite.

``generate_data`` builds the workloads (deterministic, under ``benchmarks/data/``),
``_harness`` holds what every comparison shares (peer subprocesses, medians, machine
facts, RESULTS.md sections), and each ``bench_*`` module runs one comparison::

    python -m benchmarks.generate_data
    python -m benchmarks.bench_framing --write-results
    python -m benchmarks --scale 0.1          # every benchmark in sequence

Every bench_* script has the same options (``_harness.add_arguments``), prints a markdown
table with ratios and a targets table, and with ``--write-results`` replaces its own section
of RESULTS.md.

Peers (TensorFlow, the ``tfrecord`` package) are pinned in the ``bench`` extra. Each one
runs in its own subprocess, so TensorFlow is never imported next to tfrecord_lite.
"""
