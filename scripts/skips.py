#!/usr/bin/env python3
"""Lists the tests that skipped in JUnit XML files (ctest --output-junit,
pytest --junitxml) and checks them against an allow-list.

    scripts/skips.py ALLOW_LIST SUITE=JUNIT_XML [SUITE=JUNIT_XML ...]

Called at the end of scripts/test.sh. Prints one line per skip (suite, test,
why it skipped, and whether the allow-list allows it); exits 1 if any skip is
not allowed (its count is the last line, "N skips not allowed"), 2 on a bad
allow-list or a missing file.

Allow-list (.ci/allowed-skips): one entry a line, blank lines and # comments
ignored:

    SUITES  NAME  REASON...

SUITES: a comma list of the JUnit files' suite names (release, asan, tsan,
python) or *; NAME: a shell-style pattern (fnmatch) of the test's name: ctest's
test name (GoogleTest: Suite.Test/param) or, for pytest, module::test
(test_state::test_torch_tensors); REASON: why it may skip, required.
"""

from __future__ import annotations

import fnmatch
import sys
import xml.etree.ElementTree as ET


def skip_reason(case: ET.Element, skipped: ET.Element) -> str:
    """The skip's own words: GoogleTest's message after "Skipped", else the
    last line the test printed (a script's exit 77), else the runner's."""
    out = (case.findtext("system-out") or "").splitlines()
    for i, line in enumerate(out[:-1]):
        if line.endswith(": Skipped"):
            return out[i + 1].strip()
    msg = skipped.get("message", "")
    if msg.startswith("SKIP_") or not msg:  # ctest's SKIP_RETURN_CODE / _REGULAR_EXPRESSION
        lines = [l.strip() for l in out if l.strip()]
        if lines:
            return lines[-1]
    return msg or "(no reason given)"


def skips(path: str) -> list[tuple[str, str]]:
    root = ET.parse(path).getroot()
    found = []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        name = case.get("name", "?")
        cls = case.get("classname", "")
        if cls and cls != name:  # pytest: classname "tests.python.test_state"
            name = f"{cls.rsplit('.', 1)[-1]}::{name}"
        found.append((name, skip_reason(case, skipped)))
    return found


def load_allow_list(path: str) -> list[tuple[list[str], str, str]]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise ValueError(f"{path}:{n}: want 'SUITES NAME REASON', got {line!r}")
            entries.append((parts[0].split(","), parts[1], parts[2]))
    return entries


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        allow = load_allow_list(argv[0])
        found = [(suite, name, why)
                 for suite, path in (a.split("=", 1) for a in argv[1:])
                 for name, why in skips(path)]
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"skips.py: {e}", file=sys.stderr)
        return 2
    bad = 0
    used: set[int] = set()
    for suite, name, why in found:
        i = next((i for i, (suites, pat, _) in enumerate(allow)
                  if (suite in suites or "*" in suites) and fnmatch.fnmatchcase(name, pat)), None)
        verdict = f"allowed: {allow[i][2]}" if i is not None else "NOT ALLOWED"
        print(f"  {suite}: {name}: {why} [{verdict}]")
        bad += i is None
        if i is not None:
            used.add(i)
    for i, (suites, pat, _) in enumerate(allow):
        if i not in used:  # a stale entry, or one for a suite that did not run
            print(f"  (on the list, did not skip: {','.join(suites)} {pat})")
    print(f"{len(found)} skipped, {bad} not allowed ({argv[0]})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
