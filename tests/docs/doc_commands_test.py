#!/usr/bin/env python3
"""Every command in README.md and docs/*.md is run by a test, so none drifts.

Each ```sh block is preceded by a marker that says how it is tested:

  <!-- doc-test: run [ARGS] -->      run here as written (ARGS appended to its
                                     last command, e.g. a step limit)
  <!-- doc-test: dry-run -->         each mirrored-launch local/cluster with
                                     --dry-run, each mirrored-worker with
                                     --check-flags: the flags, cluster, program
                                     and data are checked, nothing trains
  <!-- doc-test: test REGEX... -->   each REGEX names a registered CTest test
                                     that runs this kind of command
  <!-- doc-test: ci -->              each command's program is one .ci/run
                                     runs (through scripts/test.sh), or a
                                     `run` block runs
  <!-- doc-test: pins FILE -->       each package==version is pinned so in
                                     FILE (what the interop tests install)
  <!-- doc-test: skip REASON -->     cannot run on a CI machine; REASON says why

A block without a marker fails. Commands run in a scratch directory where
build/bin/ is this build's bin directory, tests/ the source tree's, and
/shared/ and /etc/mirrored/ are folders of the scratch directory; scripts/
runs from the source tree (scripts/run-demo.sh leaves its run directory in
runs/ there: the test removes it).

  doc_commands_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

BLOCK_TIMEOUT_SECONDS = 240  # one block's commands, a short training job included
MARKER = re.compile(r"<!--\s*doc-test:\s*(\S+)\s*(.*?)\s*-->")


def blocks(path):
    """(line number, marker or None, command text) of each ```sh block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    for i, line in enumerate(lines):
        if line.strip() != "```sh":
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found.append((i + 1, MARKER.search(prev), "\n".join(lines[i + 1:end])))
    return found


def logical_commands(text):
    """The block's commands: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in (without_comment(l) for l in joined.split("\n")) if line]


def without_comment(line):
    """The line up to a `#` that starts a comment (at the start or after a
    blank, outside quotes)."""
    for m in re.finditer(r"(^|\s)#", line):
        before = line[:m.start()]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
            return before.rstrip()
    return line.rstrip()


def localize(command, source, bin_dir, scratch):
    """Points the command's paths at this build and the scratch directory."""
    command = command.replace("build/bin/", bin_dir + "/")
    # The project's scripts run from the source tree they belong to.
    command = re.sub(r"(^|\s)scripts/", r"\1" + source + "/scripts/", command)
    command = re.sub(r"(^|[\s|;(])(mirrored-launch|mirrored-worker)\b", r"\1" + bin_dir + r"/\2", command)
    command = command.replace("/shared/", scratch + "/shared/").replace("/etc/mirrored/", scratch + "/etc/mirrored/")
    return command


def dry(command, bin_dir):
    """--dry-run after the launcher's local/cluster, --check-flags after the worker."""
    command = re.sub(re.escape(bin_dir) + r"/mirrored-launch (local|cluster)\b",
                     bin_dir + r"/mirrored-launch \1 --dry-run", command)
    return command.replace(bin_dir + "/mirrored-worker", bin_dir + "/mirrored-worker --check-flags")


def write_npy(archive, name, dtype, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, repr(tuple(shape)))
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    archive.writestr(name, b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def make_scratch(source, build, scratch):
    """The files the documented commands name: a secret, the source tree, a
    CIFAR-shaped .npz (8 images of 32x32x3, 10 classes)."""
    os.makedirs(os.path.join(scratch, "shared", "runs"))  # and scratch itself
    os.makedirs(os.path.join(scratch, "etc", "mirrored"))
    with open(os.path.join(scratch, "shared", "secret"), "w") as f:
        f.write("docs-test-token\n")
    for name in ("tests", "deploy", "bench"):
        os.symlink(os.path.join(source, name), os.path.join(scratch, name))
    os.makedirs(os.path.join(scratch, "build"))
    os.symlink(os.path.join(build, "bin"), os.path.join(scratch, "build", "bin"))
    with zipfile.ZipFile(os.path.join(scratch, "cifar10.npz"), "w") as npz:
        for split in ("train", "test"):
            write_npy(npz, "x_%s.npy" % split, "|u1", (8, 32, 32, 3), bytes(range(256)) * 96)
            write_npy(npz, "y_%s.npy" % split, "|u1", (8,), bytes(range(8)))


def run_block(text, mode, args, source, build, scratch):
    """Runs the block's commands with bash; an error text, or None."""
    bin_dir = os.path.join(build, "bin")
    commands = [localize(c, source, bin_dir, scratch) for c in logical_commands(text)]
    if mode == "dry-run":
        commands = [dry(c, bin_dir) for c in commands]
    if args:
        commands[-1] += " " + args
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    env = dict(os.environ, MIRRORED_BUILD_DIR=build)
    try:
        r = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True,
                           timeout=BLOCK_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return "did not end within %d s:\n%s" % (BLOCK_TIMEOUT_SECONDS, script)
    for run_dir in re.findall(r"^run directory: (runs/\S+)", r.stdout, re.M):
        shutil.rmtree(os.path.join(source, run_dir), ignore_errors=True)
    if r.returncode != 0:
        return "exit %d:\n%s\n--- output (last 30 lines)\n%s" % (
            r.returncode, script, "\n".join((r.stdout + r.stderr).splitlines()[-30:]))
    return None


def check_tests(patterns, build):
    listed = subprocess.run(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True).stdout
    names = re.findall(r"Test +#\d+: (\S+)", listed)
    missing = [p for p in patterns.split() if not any(re.fullmatch(p, n) for n in names)]
    return "no registered test matches: %s" % " ".join(missing) if missing or not patterns else None


def program(command):
    """The program a command runs (past VAR=value assignments and `export`)."""
    words = [w for w in shlex.split(command) if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    return os.path.basename(words[0]) if words else ""


def check_ci(text, source, run_programs):
    """Each program is run by .ci/run (through scripts/test.sh, build.sh), or by a `run` block."""
    ci = "".join(open(os.path.join(source, p)).read() for p in (".ci/run", "scripts/test.sh", "scripts/build.sh"))
    programs = {program(c) for c in logical_commands(text)}
    missing = [p for p in sorted(programs)
               if p not in run_programs and not re.search(r"(^|[\s/])%s\b" % re.escape(p), ci)]
    return ".ci/run does not run: %s" % " ".join(missing) if missing else None


def check_pins(text, source, pin_file):
    pins = set(re.findall(r"^\s*([A-Za-z0-9_.-]+==\S+)", open(os.path.join(source, pin_file)).read(), re.M))
    wanted = re.findall(r"[A-Za-z0-9_.-]+==[^\s]+", text)
    missing = [w for w in wanted if w not in pins]
    return "not pinned so in %s: %s" % (pin_file, " ".join(missing)) if missing or not wanted else None


def main():
    source, build = (os.path.abspath(p) for p in sys.argv[1:3])
    pages = [os.path.join(source, "README.md")] + sorted(
        os.path.join(source, "docs", p) for p in os.listdir(os.path.join(source, "docs")) if p.endswith(".md"))
    failures, counts = [], {}
    run_programs = {program(c) for page in pages for _, m, text in blocks(page)
                    if m and m.group(1) == "run" for c in logical_commands(text)}
    with tempfile.TemporaryDirectory(prefix="mirrored-doc-commands.") as top:
        for page in pages:
            for line, marker, text in blocks(page):
                where = "%s:%d" % (os.path.relpath(page, source), line)
                if not marker:
                    failures.append("%s: a ```sh block without a <!-- doc-test: ... --> marker" % where)
                    continue
                mode, args = marker.group(1), marker.group(2)
                if mode in ("run", "dry-run"):
                    scratch = os.path.join(top, "block%d" % sum(counts.values()))  # each block its own files
                    make_scratch(source, build, scratch)
                    error = run_block(text, mode, args, source, build, scratch)
                elif mode == "test":
                    error = check_tests(args, build)
                elif mode == "ci":
                    error = check_ci(text, source, run_programs)
                elif mode == "pins":
                    error = check_pins(text, source, args)
                elif mode == "skip":
                    error = None if args else "skip without a reason"
                else:
                    error = "unknown doc-test mode %r" % mode
                counts[mode] = counts.get(mode, 0) + 1
                print("%s %s %s%s" % ("FAIL" if error else "ok", where, mode, " " + args if args else ""))
                if error:
                    failures.append("%s (%s): %s" % (where, mode, error))
    print("blocks: " + ", ".join("%d %s" % (n, m) for m, n in sorted(counts.items())))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
