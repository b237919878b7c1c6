#!/bin/sh
# libcairn_veloc reads VELOC's configuration file (docs/veloc.md,
# "Configuration"). The parser's cases (each bad file named with its line and
# key) are unit tests (src/compat/veloc/veloc_config_test.cpp); this is the MPI
# side: a bad file fails VELOC_Init on every rank with the message, a missing
# file is named, ignored keys are noted, VELOC_<KEY> overrides the file.
# (Each mpirun costs seconds, more under the sanitizers: keep the cases few.)
#
#   veloc_config.sh <veloc_heatdis> <mpiexec> [mpiexec flags...]
set -u
prog=$1 mpiexec=$2
shift 2
root=$(mktemp -d "${TMPDIR:-/tmp}/veloc_config.XXXXXX") || exit 1
trap 'rm -rf "$root"' EXIT
failures=0

# check <name> <np> <expected stderr text> <file content> [mpiexec flags...]
check() {
  name=$1 np=$2 text=$3 content=$4
  shift 4
  printf '%s\n' "$content" > "$root/$name.cfg"
  if "$mpiexec" -np "$np" "$@" "$prog" "$root/$name.cfg" mem 10 5 "$root/$name.out" > "$root/$name.log" 2>&1; then
    echo "FAIL $name: VELOC_Init accepted it"; failures=$((failures + 1)); return
  fi
  # Every rank prints the error (rank r's line names it: "[r]" or the text twice).
  if [ "$(grep -cF "$text" "$root/$name.log")" -lt "$np" ]; then
    echo "FAIL $name: not every rank's error says: $text"; cat "$root/$name.log"; failures=$((failures + 1)); return
  fi
  if ! grep -q "Error initializing VELOC" "$root/$name.log"; then
    echo "FAIL $name: VELOC_Init did not return VELOC_FAILURE"; cat "$root/$name.log"; failures=$((failures + 1)); return
  fi
  echo "ok $name ($np ranks)"
}

p="persistent = $root/p"
check unknown_key 2 "unknown key 'scrach'" "scrach = $root/s
$p" "$@"
check same_dirs 2 "storage.persistent" "scratch = $root/s
persistent = $root/s" "$@"
if "$mpiexec" -np 1 "$@" "$prog" "$root/missing.cfg" mem 10 5 "$root/m.out" > "$root/missing.log" 2>&1 ||
   ! grep -qF "cannot open VELOC configuration file '$root/missing.cfg'" "$root/missing.log"; then
  echo "FAIL missing file"; cat "$root/missing.log"; failures=$((failures + 1))
else
  echo "ok missing file"
fi

# Ignored keys are accepted and noted; VELOC_SCRATCH stands in for scratch.
printf '%s\n' "$p" "chksum = true" "; a comment" "ec_interval = 0   ; inline comment" > "$root/ok.cfg"
if ! VELOC_SCRATCH="$root/s" "$mpiexec" -np 2 "$@" "$prog" "$root/ok.cfg" mem 10 5 "$root/ok.out" > "$root/ok.log" 2>&1; then
  echo "FAIL ignored keys / VELOC_SCRATCH: the run failed"; cat "$root/ok.log"; failures=$((failures + 1))
elif ! grep -qF "'chksum' is ignored under Cairn" "$root/ok.log" || ! [ -d "$root/s" ]; then
  echo "FAIL ignored keys / VELOC_SCRATCH: no note or no scratch directory"; cat "$root/ok.log"; failures=$((failures + 1))
else
  echo "ok ignored keys, VELOC_SCRATCH"
fi

[ "$failures" -eq 0 ] || { echo "FAIL: $failures cases"; exit 1; }
echo PASS
