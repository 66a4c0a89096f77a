#!/usr/bin/env bash
# Build tfrecord_lite with AddressSanitizer and UBSan into a private directory (the
# checkout's own build is left alone) and run each atheris harness for a bounded time.
#
#   fuzz/run.sh [SECONDS_PER_HARNESS] [HARNESS...]      e.g. fuzz/run.sh 60 framing example
#
# Exits non-zero on the first finding; the input that caused it is saved under
# $FUZZ_DIR/artifacts. Extra libFuzzer flags can be passed in FUZZ_FLAGS (e.g. -runs=N).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(framing example index)
PYTHON=${PYTHON:-python}
FUZZ_DIR=${FUZZ_DIR:-$PWD/fuzz/.work}
SRC=$FUZZ_DIR/src

# The sanitizer build, from a copy of the sources; mtimes are kept, so an unchanged
# source is not recompiled on the next run.
mkdir -p "$SRC" "$FUZZ_DIR/artifacts"
generated=()
for pyx in csrc/*.pyx; do generated+=("--exclude=${pyx%.pyx}.c"); done
tar -cf - --exclude='*.so' --exclude=__pycache__ "${generated[@]}" \
    setup.py pyproject.toml csrc tfrecord_lite | tar -xpf - -C "$SRC"
if ! (cd "$SRC" && TFRECORD_LITE_SANITIZE=1 "$PYTHON" setup.py -q build_ext --inplace \
        -b "$FUZZ_DIR/build" -t "$FUZZ_DIR/build/tmp") >"$FUZZ_DIR/build.log" 2>&1; then
    cat "$FUZZ_DIR/build.log"
    exit 1
fi

# gcc's ASan runtime must be loaded first. Its weak SanitizerCoverage stubs would then
# swallow atheris' Python coverage, so a small shim loaded ahead of it forwards those
# calls to atheris' libFuzzer (see covshim.c). atheris instruments the Python code
# (the reader, the pure-Python twins, the glue); the gcc-built C core is checked by the
# sanitizers but gives no coverage feedback.
gcc -shared -fPIC -O2 -o "$FUZZ_DIR/covshim.so" fuzz/covshim.c -ldl
# libstdc++ follows so that ASan finds the real __cxa_throw (atheris throws C++ exceptions).
PRELOAD=$FUZZ_DIR/covshim.so:$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so)

for h in "${HARNESSES[@]}"; do
    corpus=$FUZZ_DIR/corpus/$h
    mkdir -p "$corpus"
    echo "== fuzz_$h: ${SECONDS_EACH}s"
    # New inputs go to the first directory; fuzz/corpus/<h> holds the seeds and every
    # input that once was a finding, so each run replays them first.
    env PYTHONPATH="$SRC" \
        LD_PRELOAD="$PRELOAD" \
        ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:allocator_may_return_null=1:quarantine_size_mb=64 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$PYTHON" "fuzz/fuzz_$h.py" "$corpus" "fuzz/corpus/$h" \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=1024 \
        -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/artifacts/$h-" \
        ${FUZZ_FLAGS:-}
done
