#!/usr/bin/env bash
# Fuzzes the runtime with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer (clang):
#
#   tools/fuzz.sh SECONDS [TARGET [LIBFUZZER_FLAG...]]  # TARGET: program_fuzzer (default), payload_fuzzer
#
# program_fuzzer loads and runs programs; payload_fuzzer runs CudaBackend's payload checks on the
# CPU. The corpus lives in $EXECUTORCH_BUILD_CACHE/state/fuzz/TARGET/corpus and grows across runs;
# it starts from the test models exported for the CPU and for CUDA (or their delegate payloads:
# tests/hostile/make_corpus.py) and the inputs kept in tests/fuzz/regressions/TARGET. A crash is written to .../TARGET/crashes/ and
# fails the run; minimize it with `-minimize_crash=1`, fix it, and keep the minimized file in
# tests/fuzz/regressions/TARGET/, where //tests/fuzz:TARGET_regressions replays it on every test run.
# The fuzz build has its own output base, so it never invalidates the ordinary build's cache.
set -euo pipefail
seconds=${1:?usage: tools/fuzz.sh SECONDS [TARGET]}
target=${2:-program_fuzzer}
shift $(($# < 2 ? $# : 2))
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cache=${EXECUTORCH_BUILD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/executorch-build}
work=$cache/state/fuzz/$target  # state/ is visible inside the build root at the same path
mkdir -p "$work/corpus" "$work/crashes" "$work/seeds"

# Seeds, made once: the valid programs, exported with the ordinary build's Python and extension.
# (After this, only the fuzz output base is used, so an ordinary build may run alongside.)
if [[ -z $(ls "$work/seeds") ]]; then
  tools/bazel build //tests/hostile:make_corpus @local_cuda//:lib/libcudart.so.13 >/dev/null 2>&1 ||
    tools/bazel build --//:cuda=False //tests/hostile:make_corpus
  cudart=$(readlink -f bazel-bin/external/*local_cuda*/lib/libcudart.so.13 2>/dev/null || true)
  seeds=--seeds
  [[ $target == payload_fuzzer ]] && seeds=--payloads
  LD_PRELOAD=${cudart:-} bazel-bin/tests/hostile/make_corpus "$seeds" "$work/seeds"
fi
cp -n tests/fuzz/regressions/"$target"/* "$work/seeds/" 2>/dev/null || true

echo "fuzz.sh: $target for $seconds s (corpus $work/corpus: $(ls "$work/corpus" | wc -l) inputs)"
set +e
tools/bazel --output_base="$cache/state/bazel-fuzz" run --config=fuzz "//tests/fuzz:$target" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$work/crashes/" "$@" "$work/corpus" "$work/seeds"
rc=$?
set -e
crashes=$(ls "$work/crashes" | wc -l)
echo "fuzz.sh: exit $rc, corpus $(ls "$work/corpus" | wc -l) inputs, $crashes crash file(s) in $work/crashes"
exit $((rc != 0 || crashes != 0))
