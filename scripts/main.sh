#!/usr/bin/env bash
# Builds Cairn (Release, build/) and runs the main job: the mini reverse-time
# migration demo (examples/rtm, docs/rtm.md) with its defaults, Cairn and the
# synchronous baseline side by side. Extra arguments go to cairn-rtm (see
# `build/bin/cairn-rtm --help`). It writes rtm-out/velocity.png,
# rtm-out/image.png and Cairn's timeline rtm-out/timeline.json, then draws the
# timeline pictures (rtm-out/timeline-*.png) with matplotlib (deps.sh installs
# Debian's python3-matplotlib when no python3 has it).
# Build output goes to stderr; stdout is the demo's summary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/deps.sh
{
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  # Only what the main job needs: the test suite is scripts/test.sh's job.
  cmake --build build -j"$(nproc)" --target cairn_rtm cairn_bench cairn_cli
} >&2

out=rtm-out
trace=
prev=
for a in "$@"; do  # follow --out/--trace if given
  case "$prev" in --out) out="$a" ;; --trace) trace="$a" ;; esac
  case "$a" in --out=*) out="${a#--out=}" ;; --trace=*) trace="${a#--trace=}" ;; esac
  prev="$a"
done
trace="${trace:-$out/timeline.json}"

build/bin/cairn-rtm "$@"

# matplotlib: the python3 in PATH if it has it, else Debian's python3-matplotlib
# for /usr/bin/python3 (scripts/deps.sh installs it when neither has it).
plot_python=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import matplotlib' >/dev/null 2>&1; then plot_python="$py"; break; fi
done
if [[ -s "$trace" ]]; then
  if [[ -n "$plot_python" ]]; then
    "$plot_python" tools/cairn-plot "$trace" --out "${trace%.json}" >&2
    echo "timeline pictures: ${trace%.json}-timeline.png, -bandwidth.png, -cache.png"
  else
    echo "timeline pictures skipped: no python3 has matplotlib (scripts/deps.sh installs python3-matplotlib); then run tools/cairn-plot $trace" >&2
  fi
fi
