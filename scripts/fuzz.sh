#!/usr/bin/env bash
# Builds the libFuzzer targets (the "fuzz" preset: clang++-14, ASan + UBSan,
# build-fuzz/) and runs each bin/fuzz_* for a bounded time
# (docs/design.md, "Fuzzing"):
#
#   scripts/fuzz.sh [SECONDS [RUNS]]    # per target; default 300 s, no run cap
#
# scripts/test.sh runs it briefly in CI (CAIRN_FUZZ_SECONDS there). Each
# target starts from its seeds (fuzz/corpus/<target>/) and the committed
# findings (tests/data/fuzz/<target>/) and from what earlier runs on this
# machine discovered: the corpus is kept per machine, outside the checkout
# (CAIRN_FUZZ_CORPUS, default ~/.cache/cairn/fuzz-corpus/<target>/, never
# committed), so that CI's short runs from fresh clones go on where the last
# one stopped instead of starting over from the seeds; libFuzzer's seed
# differs at every run. A crash,
# leak, sanitizer report, timeout (-timeout) or an input needing more than
# -rss_limit_mb fails the run; libFuzzer writes the input to
# build-fuzz/findings/<target>-crash-<sha1> (or leak-, timeout-, oom-).
# Reproduce it with `build-fuzz/bin/fuzz_<target> FILE`, copy it to
# tests/data/fuzz/<target>/ under a name that says what it is (the test
# suite replays it: tests/fuzz_corpus_test.cpp) and fix the library.
#
# Environment: CAIRN_FUZZ_JOBS=N build parallelism and targets fuzzed at once
# (default 2); CAIRN_FUZZ_CORPUS=DIR the kept corpus (above).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-300}"
runs="${2:--1}"
jobs="${CAIRN_FUZZ_JOBS:-2}"
start=$SECONDS

scripts/deps.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs"
echo "fuzz.sh: built in $((SECONDS - start))s"

mkdir -p build-fuzz/findings
corpus_root="${CAIRN_FUZZ_CORPUS:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/fuzz-corpus}"
# fuzz_one TARGET: fuzzes one target; its exit status is libFuzzer's.
fuzz_one() {
  local target="$1" work="$corpus_root/$1" log="build-fuzz/findings/$1.log" t0=$SECONDS
  local -a dirs=("$work" "fuzz/corpus/$target")
  [[ -d "tests/data/fuzz/$target" ]] && dirs+=("tests/data/fuzz/$target")
  mkdir -p "$work"
  echo "fuzz.sh: $target for ${seconds}s (log: $log)"
  if "build-fuzz/bin/fuzz_$target" -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$target-" "${dirs[@]}" >"$log" 2>&1; then
    echo "fuzz.sh: $target: $(grep -m1 '^stat::number_of_executed_units' "$log" | awk '{print $2}') inputs" \
         "in $((SECONDS - t0))s, corpus $(ls "$work" | wc -l) files, no finding"
  else
    grep -E -A20 '^==[0-9]+==ERROR|runtime error|deadly signal|ERROR: libFuzzer' "$log" | head -40 >&2 || true
    echo "fuzz.sh: $target FAILED; the input: $(ls -t build-fuzz/findings/"$target"-* | grep -v '\.log$' | head -1)" >&2
    return 1
  fi
}
targets=()
for bin in build-fuzz/bin/fuzz_*; do
  target="${bin##*/fuzz_}"
  [[ -d "fuzz/corpus/$target" ]] || { echo "fuzz.sh: no seed corpus fuzz/corpus/$target" >&2; exit 1; }
  targets+=("$target")
done
# The targets run side by side, $jobs at a time: each libFuzzer process is
# single-threaded, so on 2 cores two targets fuzz as many inputs each as one
# alone would, in half the wall time (CI: 2 x 20 s in 20 s).
failed=()
declare -A running=()  # pid -> target
reap() {  # waits for one running target; records it if it failed
  local pid rc=0
  wait -n -p pid "${!running[@]}" || rc=$?
  ((rc == 0)) || failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for target in "${targets[@]}"; do
  ((${#running[@]} < jobs)) || reap
  fuzz_one "$target" &
  running[$!]="$target"
done
while ((${#running[@]})); do reap; done
echo "fuzz.sh: done in $((SECONDS - start))s"
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in: ${failed[*]} (see above; reproduce with build-fuzz/bin/fuzz_<target> FILE)" >&2
  exit 1
fi
