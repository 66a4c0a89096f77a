"""What every benchmark shares: running a peer in its own subprocess, timing repeats,
medians, machine facts, markdown tables and per-benchmark sections of RESULTS.md.

Peers run in separate interpreters because TensorFlow and the ``tfrecord`` package cannot
share one, and so that tfrecord_lite is never measured next to a loaded TensorFlow::

    result = run_in_subprocess("benchmarks.bench_framing:read_lite", {"paths": paths, "repeats": 5})

The function runs as ``function(**args)`` in a fresh ``python`` (the same executable) with
the caller's ``sys.path``, so it imports the same tfrecord_lite (an installed one or the
source tree) as the caller, and must return something JSON can encode. The child also reports which of the heavy modules
it ended up importing (``result["_imported"]``), so a caller can prove isolation.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
WATCHED_MODULES = ("tensorflow", "tfrecord", "tfrecord_lite", "torch")

__all__ = [
    "PeerError", "run_in_subprocess", "run_rounds", "measure_workload", "time_repeats", "summarize", "median",
    "warm_page_cache", "peak_rss_mb", "measurement", "measurements_table", "machine_info", "machine_lines", "markdown_table", "ratio",
    "workload_heading", "op_tables", "workload_tables", "targets_table", "runs_line", "package_results",
    "add_arguments", "finish", "log", "main", "update_results_section", "RESULTS_PATH",
]


class PeerError(RuntimeError):
    """A benchmark subprocess failed (import error, exception, timeout); carries its stderr."""


def run_in_subprocess(function_path: str, args: dict | None = None, *, env: dict | None = None,
                      timeout: float | None = None, quiet_tf: bool = True, prefix: list | None = None):
    """Call ``module:function(**args)`` in a new interpreter and return its JSON result.

    env: extra environment variables for the child. quiet_tf: silence TensorFlow's C++ log
    lines. prefix: a command that runs the interpreter (a profiler such as py-spy). Raises
    PeerError (with the child's stderr tail) if the child fails."""
    child_env = dict(os.environ)
    if quiet_tf:
        child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if env:
        child_env.update({k: str(v) for k, v in env.items()})
    with tempfile.TemporaryDirectory(prefix="tfl-bench-") as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        out_path = os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump({"function": function_path, "args": args or {}, "sys_path": _sys_path()}, f)
        try:
            proc = subprocess.run(
                [*(prefix or ()), sys.executable, os.path.abspath(__file__), spec_path, out_path],
                cwd=REPO_ROOT, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise PeerError(f"{function_path} timed out after {timeout}s") from exc
        if proc.returncode != 0 or not os.path.exists(out_path):
            tail = "\n".join(proc.stderr.strip().splitlines()[-25:])
            raise PeerError(f"{function_path} failed (exit code {proc.returncode}):\n{tail}")
        with open(out_path) as f:
            return json.load(f)


def _sys_path() -> list[str]:
    """The caller's import path with "" made absolute, and the repository root last (so
    ``benchmarks`` imports without shadowing an installed tfrecord_lite)."""
    path = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    if REPO_ROOT not in path:
        path.append(REPO_ROOT)
    return path


def _child_main(spec_path: str, out_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    sys.path[:] = spec["sys_path"]
    module_name, _, func_name = spec["function"].partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    result = func(**spec["args"])
    if isinstance(result, dict):
        result = dict(result)
        result["_imported"] = sorted(m for m in WATCHED_MODULES if m in sys.modules)
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(out_path + ".tmp", out_path)


def run_rounds(plan, rounds: int = 1, timeout: float | None = None, log=None) -> dict:
    """Run every peer of plan, a list of (key, label, "module:function", args), in its own
    process, `rounds` times in turn, and pool the timed runs of each key.

    The function must return {"seconds": [...]} plus, optionally, "cpu_seconds", other lists
    of times named "..._seconds" (pooled too) and any other JSON values (the last round's are
    kept). Returns {key: {"label", "seconds", "cpu_seconds", ..., "result"}} in plan order.
    Taking turns spreads a burst of load from elsewhere on the machine over all peers
    instead of one."""
    pooled = {}
    for rnd in range(rounds):
        for key, label, function, args in plan:
            if log:
                log(f"{label}" + (f" (round {rnd + 1}/{rounds})" if rounds > 1 else "") + " ...")
            res = run_in_subprocess(function, args, timeout=timeout)
            p = pooled.setdefault(key, {"label": label, "seconds": [], "cpu_seconds": []})
            for name, values in res.items():
                if name.endswith("seconds") and isinstance(values, list):
                    p.setdefault(name, []).extend(values)
            p["result"] = res
            if log:
                log(f"    median {median(res['seconds']):.3f}s")
    return pooled


# -- timing --------------------------------------------------------------------------------

def time_repeats(fn, repeats: int = 5, warmup: int = 1, setup=None, teardown=None,
                 cpu_times: list | None = None) -> list[float]:
    """Seconds taken by fn() in each of `repeats` timed runs after `warmup` untimed ones.

    setup()/teardown() run around every call, outside the timing (e.g. remove output files).
    A garbage collection runs before each call so one run's garbage is not billed to the next.
    cpu_times, if given, receives each timed run's process CPU seconds (all threads): for a
    single-threaded peer, CPU well below wall time means it was waiting for a core."""
    times = []
    for i in range(warmup + repeats):
        if setup is not None:
            setup()
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        if teardown is not None:
            teardown()
        if i >= warmup:
            times.append(elapsed)
            if cpu_times is not None:
                cpu_times.append(cpu)
    return times


def median(values) -> float:
    return statistics.median(values)


def summarize(seconds: list[float], records: int, nbytes: int, cpu_seconds: list[float] | None = None) -> dict:
    """Median/min/max seconds and the median's records/s and MB/s (MB = 10**6 bytes); with
    cpu_seconds, also the median CPU seconds per run."""
    med = median(seconds)
    extra = {"cpu_seconds": list(cpu_seconds), "median_cpu_s": median(cpu_seconds)} if cpu_seconds else {}
    return {
        **extra,
        "seconds": list(seconds),
        "median_s": med,
        "min_s": min(seconds),
        "max_s": max(seconds),
        "records": records,
        "bytes": nbytes,
        "records_per_s": records / med if med > 0 else float("inf"),
        "mb_per_s": nbytes / 1e6 / med if med > 0 else float("inf"),
    }


def warm_page_cache(paths, chunk: int = 8 << 20) -> int:
    """Read every file once so timed runs start from the page cache; returns bytes read."""
    total = 0
    buf = bytearray(chunk)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
    return total


def peak_rss_mb() -> float | None:
    """Peak resident set size of this process in MB (10**6 bytes). Read from VmHWM, which
    starts afresh at exec; getrusage's ru_maxrss is carried over from the parent through fork
    and exec, so a child of a big process would report the parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    try:
        import resource
    except ImportError:
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1e6 if sys.platform == "darwin" else rss * 1024 / 1e6


# -- machine facts -----------------------------------------------------------------------

def _version(*dists):
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine_info() -> dict:
    """CPU, cores, memory, OS, interpreter and package versions, date and load, without
    importing TensorFlow (versions come from package metadata)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    try:
        date = subprocess.run(["date"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        date = datetime.datetime.now().astimezone().strftime("%a %b %d %H:%M:%S %Z %Y")
    try:
        import tfrecord_lite

        lite = {"version": tfrecord_lite.__version__, "implementation": tfrecord_lite.implementation}
        try:
            lite["crc32c"] = tfrecord_lite._native.framing.crc32c_backend()
        except AttributeError:
            pass
    except ImportError:
        lite = None
    return {
        "date": date,
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "sse4_2": "sse4_2" in _cpu_flags(),
        "memory_gb": round(mem / 2**30, 1) if mem else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg": [round(x, 2) for x in load] if load else None,
        "tfrecord_lite": lite,
        "versions": {
            "tensorflow": _version("tensorflow-cpu", "tensorflow"),
            "numpy": _version("numpy"),
            "protobuf": _version("protobuf"),
            "tfrecord": _version("tfrecord"),
            "crc32c": _version("crc32c"),
            "cython": _version("Cython", "cython"),
        },
    }


def machine_lines(info: dict) -> list[str]:
    """machine_info() as markdown bullet lines."""
    v = info["versions"]
    lite = info.get("tfrecord_lite") or {}
    lines = [
        f"- Date: {info['date']}",
        f"- Machine: {info['cpu']}, {info['cores']} logical cores ({info['usable_cores']} usable), "
        f"{info['memory_gb']} GiB RAM, {info['os']}",
        f"- Python {info['python']}, TensorFlow {v['tensorflow']}, numpy {v['numpy']}, "
        f"protobuf {v['protobuf']}, tfrecord {v['tfrecord']}, crc32c {v['crc32c']}",
    ]
    if lite:
        lines.append(f"- tfrecord_lite {lite.get('version')} ({lite.get('implementation')} core, "
                     f"CRC32C: {lite.get('crc32c', '?')})")
    if info.get("loadavg"):
        lines.append(f"- Load average at start: {' / '.join(str(x) for x in info['loadavg'])}")
    return lines


# -- reporting -----------------------------------------------------------------------------

def markdown_table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A GitHub markdown table; align is one character per column ("l" or "r")."""
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [[str(c) for c in row] for row in rows]
    rule = ["---:" if a == "r" else ":---" for a in align]
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(out)


def measure_workload(module: str, name: str, workload: dict, op: str, peers, args: dict, rounds: int = 1,
                     timeout: float | None = None, log=None) -> dict:
    """Run each peer of ``module`` on one workload, each in its own process, ``rounds``
    times in turn, and return {key: measurement()}. peers: (key, label, function[, extra
    args]); every peer gets ``args`` (plus its extras). Peers that report a "checksum" (at least
    one must) must all report the same one."""
    plan = [(key, label, f"{module}:{func}", {**args, **(rest[0] if rest else {})})
            for key, label, func, *rest in peers]
    pooled = run_rounds(plan, rounds, timeout, log)
    ms = {k: measurement(p, name, op, workload["records"], workload["bytes"]) | {"key": k}
          for k, p in pooled.items()}
    if len({m["checksum"] for m in ms.values() if "checksum" in m}) != 1:
        raise AssertionError(f"the peers disagree: { {k: m.get('checksum') for k, m in ms.items()} }")
    return ms


def measurement(pooled: dict, workload: str, op: str, records: int, nbytes: int) -> dict:
    """One summarize()d row from a run_rounds() entry, with the peer's label, what it had
    imported, its implementation (if it said) and its other extra values."""
    res = pooled["result"]
    extras = {k: v for k, v in res.items() if k not in ("seconds", "cpu_seconds", "_imported")}
    return {"workload": workload, "op": op, "label": pooled["label"], "imported": res.get("_imported", []),
            **extras, **summarize(pooled["seconds"], records, nbytes, pooled["cpu_seconds"] or None)}


def measurements_table(rows: list[dict], refs: list[tuple[str, str]], extra: list[tuple[str, str]] = (),
                       mb_format: str = ",.1f") -> str:
    """Measurements as a markdown table: records/s, MB/s, median seconds (min-max), CPU/wall,
    "vs" columns and extra (header, key) columns.

    refs: (header, key) pairs, one "vs" column for each key some row has: a row's records/s
    over that of the row with this key and the same workload and op (blank if there is none)."""
    by_key = {}
    for m in rows:
        by_key.setdefault((m["workload"], m["op"], m["key"]), m)
    refs = [(h, k) for h, k in refs if any(m["key"] == k for m in rows)]
    headers = ["op", "implementation", "records/s", "MB/s", "median s (min-max)", "CPU/wall"]
    headers += [h for h, _ in refs] + [h for h, _ in extra]
    out = []
    for m in rows:
        row = [m["op"], m["label"], f"{m['records_per_s']:,.0f}", format(m["mb_per_s"], mb_format),
               f"{m['median_s']:.3f} ({m['min_s']:.3f}-{m['max_s']:.3f})",
               f"{m['median_cpu_s'] / m['median_s']:.2f}" if "median_cpu_s" in m else ""]
        for _, k in refs:
            ref = by_key.get((m["workload"], m["op"], k))
            row.append(f"{m['records_per_s'] / ref['records_per_s']:.2f}x" if ref else "")
        row += [(f"{m[k]:,.0f}" if isinstance(m.get(k), (int, float)) else str(m.get(k, ""))) for _, k in extra]
        out.append(row)
    return markdown_table(headers, out, "ll" + "r" * (len(headers) - 2))


def workload_heading(name: str, workload: dict) -> list[str]:
    """A workload's section heading (name, description, records, MB) and a blank line."""
    return [f"### {name.upper()}: {workload['description']} ({workload['records']:,} records, "
            f"{workload['bytes'] / 1e6:,.1f} MB)", ""]


def op_tables(rows: list[dict], refs: list[tuple[str, str]], extra: list[tuple[str, str]] = (),
              **table_options) -> list[str]:
    """A measurements_table() and a blank line for each op of rows, in order of first appearance."""
    lines = []
    for op in dict.fromkeys(m["op"] for m in rows):
        lines += [measurements_table([m for m in rows if m["op"] == op], refs, extra, **table_options), ""]
    return lines


def workload_tables(results: dict, refs: list[tuple[str, str]], extra: list[tuple[str, str]] = (),
                    per_op: bool = True, **table_options) -> list[str]:
    """For each workload of results: its heading, then its measurements in one table per op
    (per_op) or in a single table."""
    lines = []
    for name, w in results["workloads"].items():
        rows = [m for m in results["measurements"] if m["workload"] == name]
        lines += workload_heading(name, w)
        if per_op:
            lines += op_tables(rows, refs, extra, **table_options)
        else:
            lines += [measurements_table(rows, refs, extra, **table_options), ""]
    return lines


def ratio(workload: str, what: str, numerator: dict, denominator: dict, target: float | None,
          key: str = "records_per_s") -> dict:
    """numerator[key] / denominator[key] (two summarize()d measurements) against a target."""
    value = numerator[key] / denominator[key]
    return {"workload": workload, "what": what, "numerator": numerator["label"],
            "denominator": denominator["label"], "ratio": value, "target": target,
            "met": None if target is None else value >= target}


def targets_table(ratios: list[dict]) -> str:
    """The ratios that have a target as a markdown table: measured, target, met."""
    rows = [[r["workload"].upper(), r["what"], f"{r['numerator']} / {r['denominator']}", f"{r['ratio']:.2f}x",
             f">= {r['target']:g}x", "yes" if r["met"] else "**no**"]
            for r in ratios if r["target"] is not None]
    return "### Targets\n\n" + markdown_table(["workload", "measurement", "ratio", "measured", "target", "met"],
                                               rows, "lllrrl")


def runs_line(results: dict) -> str:
    """A conditions bullet describing repeats, warm-up and rounds."""
    rounds = results.get("rounds", 1)
    runs = f"{results['repeats']} timed runs after {results['warmup']} warm-up run(s)"
    if rounds > 1:
        runs = (f"{rounds * results['repeats']} timed runs: {rounds} rounds in which the peers take "
                f"turns, each peer process doing {runs}")
    return f"- Medians of {runs}; files in the page cache, each peer in its own process"


def package_results(section: str, machine: dict, workloads: dict, measurements: list[dict], ratios: list[dict],
                    repeats: int, warmup: int, rounds: int) -> dict:
    """What a bench_* run() returns, once no tfrecord_lite measurement (key "lite...") ran with
    TensorFlow loaded. workloads: {name: workload} as generate_data gives them, in report order."""
    for m in measurements:
        if m["key"].startswith("lite") and "tensorflow" in m["imported"]:
            raise AssertionError("a tfrecord_lite measurement ran with tensorflow loaded")
    return {
        "benchmark": section,
        "machine": machine,
        "repeats": repeats,
        "rounds": rounds,
        "warmup": warmup,
        "workloads": {n: {k: w[k] for k in ("description", "records", "bytes")} for n, w in workloads.items()},
        "measurements": measurements,
        "ratios": ratios,
    }


def add_arguments(ap, section: str, repeats: int = 5) -> None:
    """The command-line options every bench_* script shares."""
    ap.add_argument("--data-dir", default=os.path.join(REPO_ROOT, "benchmarks", "data"),
                    help="workload directory (generated if missing)")
    ap.add_argument("--scale", type=float, default=1.0, help="workload scale when generating")
    ap.add_argument("--repeats", type=int, default=repeats, help="timed runs per peer process")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs before them")
    ap.add_argument("--rounds", type=int, default=1,
                    help="peers take turns this many times; medians pool all rounds (default 1)")
    ap.add_argument("--write-results", action="store_true", help=f"update the {section} section of RESULTS.md")
    ap.add_argument("--json", help="also save the raw results here")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per peer process")
    ap.add_argument("--note", action="append", default=[], help="a line to add to the conditions (repeatable)")


def finish(args, section: str, results: dict, text: str) -> None:
    """Print the report, save the JSON with --json, update RESULTS.md with --write-results
    (the section results["section"] names, where a script keeps several, else `section`)."""
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if args.write_results:
        update_results_section(results.get("section", section), text, RESULTS_PATH)
        print(f"updated {RESULTS_PATH}", file=sys.stderr)


def log(msg: str) -> None:
    """Progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def main(argv, section: str, description: str, measure, report, repeats: int = 5, options=None) -> None:
    """A bench_* script's command line: parse the shared options (add_arguments(), then
    options(ap) for its own), call measure(args, repeats=, warmup=, timeout=, log=, rounds=)
    for the results, add the --note lines and finish() with report(results)."""
    ap = argparse.ArgumentParser(description=description)
    add_arguments(ap, section, repeats=repeats)
    if options is not None:
        options(ap)
    args = ap.parse_args(argv)
    results = measure(args, repeats=args.repeats, warmup=args.warmup, timeout=args.timeout, log=log,
                      rounds=args.rounds)
    results["notes"] = args.note
    finish(args, section, results, report(results))


_RESULTS_HEADER = """# tfrecord_lite benchmark results

Each section is written by one `benchmarks/bench_*.py` script (`--write-results`) and
replaced when that script runs again. Figures are medians of repeated runs; see each
section for the machine, versions and conditions.
"""


def update_results_section(key: str, body: str, path: str = RESULTS_PATH) -> None:
    """Replace (or append) the section of RESULTS.md owned by benchmark `key`.

    A section is everything between ``<!-- begin {key} -->`` and ``<!-- end {key} -->``;
    other benchmarks' sections are left untouched."""
    begin, end = f"<!-- begin {key} -->", f"<!-- end {key} -->"
    block = f"{begin}\n{body.strip()}\n{end}\n"
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = _RESULTS_HEADER
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        tail = tail.lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python benchmarks/_harness.py SPEC.json RESULT.json (used by run_in_subprocess)")
    _child_main(sys.argv[1], sys.argv[2])
