#!/usr/bin/env bash
# cairn-plot turns a recorded timeline (tests/data/trace_small.json, written by
# `CAIRN_TRACE=... cairn-bench uniform --count 6 --size 8MiB --host-cache 16MiB`)
# into three PNGs, and rejects a file that is not a trace. Runs on the python3
# in PATH if it has matplotlib, else on /usr/bin/python3 (Debian's
# python3-matplotlib, installed by scripts/deps.sh). Skips (77) when neither
# has it: a skip that scripts/test.sh does not allow (.ci/allowed-skips).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python3=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import matplotlib' >/dev/null 2>&1; then python3="$py"; break; fi
done
[[ -n "$python3" ]] || { echo "matplotlib not installed (scripts/deps.sh installs python3-matplotlib): skipped"; exit 77; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$python3" "$root/tools/cairn-plot" "$root/tests/data/trace_small.json" --out "$out/t" >"$out/list"
for kind in timeline bandwidth cache; do
  f="$out/t-$kind.png"
  grep -qx "$f" "$out/list" || { echo "not listed: $f"; exit 1; }
  [[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] || { echo "not a PNG: $f"; exit 1; }
done
echo '{"not": "a trace"}' >"$out/bad.json"
if "$python3" "$root/tools/cairn-plot" "$out/bad.json" --out "$out/b" 2>"$out/err"; then
  echo "a non-trace was accepted"; exit 1
fi
grep -q "not a trace-event file" "$out/err" || { echo "unclear error: $(cat "$out/err")"; exit 1; }
echo "cairn-plot: ok"
