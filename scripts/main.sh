#!/usr/bin/env bash
# Builds Cairn (Release, build/) and runs the main job: the mini reverse-time
# migration demo (examples/rtm, docs/rtm.md) with its defaults, Cairn and the
# synchronous baseline side by side. Extra arguments go to cairn-rtm (see
# `build/bin/cairn-rtm --help`). It writes rtm-out/velocity.png,
# rtm-out/image.png and Cairn's timeline rtm-out/timeline.json, then draws the
# timeline pictures (rtm-out/timeline-*.png) when matplotlib is available.
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

if [[ -s "$trace" ]]; then
  if python3 -c 'import matplotlib' 2>/dev/null; then
    tools/cairn-plot "$trace" --out "${trace%.json}" >&2
    echo "timeline pictures: ${trace%.json}-timeline.png, -bandwidth.png, -cache.png"
  else
    echo "timeline pictures skipped: pip install matplotlib, then tools/cairn-plot $trace" >&2
  fi
fi
