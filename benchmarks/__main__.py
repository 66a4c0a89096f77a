"""Run every benchmark in sequence on the same workloads:

    python -m benchmarks [--scale 1.0] [--write-results] [--only example,write] [options]

Options other than --only are passed to each bench_* script (see any script's --help):
--scale, --data-dir, --repeats, --warmup, --rounds, --timeout, --note, --write-results.
The first benchmark generates the workloads under --data-dir; the others reuse them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

BENCHMARKS = ("framing", "example", "dataset", "write", "to_npy", "scaling", "cloud", "arrow", "ray")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0].rstrip(":"),
                                 epilog="Other options are passed to every benchmark.")
    ap.add_argument("--only", default=",".join(BENCHMARKS),
                    help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all)")
    args, rest = ap.parse_known_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")
    if "--json" in rest:
        ap.error("--json names one file; run the scripts one by one to save each one's results")
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        print(f"== bench_{name} ==", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        module.main(rest)
        print(f"== bench_{name}: {time.perf_counter() - t0:.0f}s ==", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
