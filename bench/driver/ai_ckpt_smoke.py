#!/usr/bin/env python3
"""ctest ai_ckpt_smoke: `cairn-bench ai-ckpt` end to end at a tiny size; the
JSON keys that scripts rely on exist and hold sane values."""
import json
import subprocess
import sys
import tempfile
import os


def main() -> int:
    bench = sys.argv[sys.argv.index("--bench") + 1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ai.json")
        subprocess.run([bench, "ai-ckpt", "--size", "1MiB", "--pattern", "reversed", "--cow", "0.05",
                        "--iterations", "4", "--every", "2", "--compute-ms", "5", "--repeat", "1",
                        "--dir", tmp, "--quiet", "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            doc = json.load(f)["ai_ckpt"]
    errors = []

    def number(path):
        v = doc
        for k in path.split("."):
            if not isinstance(v, dict) or k not in v:
                errors.append(f"ai_ckpt.{path} missing")
                return None
            v = v[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            errors.append(f"ai_ckpt.{path} is not a number: {v!r}")
            return None
        return v

    call = number("checkpoint_call_s")
    if call is not None and not 0 < call < 10:
        errors.append(f"checkpoint_call_s {call} is not in (0, 10) s")
    for mode in ("sync", "copy", "zero_copy", "zero_copy_learned", "copy_same_memory"):
        inc = number(f"runtime_increase_s.{mode}")
        # Against a noisy baseline a mode may come out slightly faster.
        if inc is not None and not -5 < inc < 60:
            errors.append(f"runtime_increase_s.{mode} {inc} is not in (-5, 60) s")
    mem = number("extra_memory_bytes.zero_copy_learned")
    if mem is not None and not 0 < mem < 64 << 20:
        errors.append(f"extra_memory_bytes.zero_copy_learned {mem} is not in (0, 64 MiB)")
    # Copy mode given zero-copy's memory: no more than that (whole blocks).
    same = number("extra_memory_bytes.copy_same_memory")
    if mem is not None and same is not None and not 0 < same <= max(mem, 8 << 20):
        errors.append(f"extra_memory_bytes.copy_same_memory {same} is not in (0, {max(mem, 8 << 20)}]")
    for key in ("red_wait_s", "fault_s"):
        for mode in ("zero_copy", "zero_copy_learned"):
            v = number(f"{key}.{mode}")
            if v is not None and not 0 <= v < 60:
                errors.append(f"{key}.{mode} {v} is not in [0, 60) s")
    # --base: each regular order is accepted and reported; anything else is
    # refused with its name.
    with tempfile.TemporaryDirectory() as tmp:
        for base in ("sequential", "reversed", "random"):
            out = os.path.join(tmp, base + ".json")
            subprocess.run([bench, "ai-ckpt", "--size", "256KiB", "--pattern", "irregular", "--base", base,
                            "--iterations", "2", "--every", "1", "--compute-ms", "1", "--repeat", "1",
                            "--dir", tmp, "--quiet", "--json", out], check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                got = json.load(f)["ai_ckpt"].get("base")
            if got != base:
                errors.append(f"--base {base}: the JSON says base {got!r}")
        out = os.path.join(tmp, "flipping.json")
        subprocess.run([bench, "ai-ckpt", "--size", "256KiB", "--pattern", "flipping",
                        "--iterations", "4", "--every", "1", "--compute-ms", "1", "--repeat", "1",
                        "--dir", tmp, "--quiet", "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            got = json.load(f)["ai_ckpt"].get("pattern")
        if got != "flipping":
            errors.append(f"--pattern flipping: the JSON says pattern {got!r}")
        bad = subprocess.run([bench, "ai-ckpt", "--pattern", "irregular", "--base", "irregular"],
                             capture_output=True, text=True)
        if bad.returncode != 2 or "'irregular' is not sequential, reversed or random" not in bad.stderr:
            errors.append(f"--base irregular: exit {bad.returncode}, {bad.stderr.strip()!r}")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
