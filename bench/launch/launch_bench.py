#!/usr/bin/python3
"""Start-up benchmark: seconds from invoking the launcher to the first
completed training step, `mirrored-launch local` vs `torchrun` + PyTorch DDP
on Gloo, for the same worker counts and model (one CPU replica / thread per
worker), on this machine.

  /usr/bin/python3 bench/launch/launch_bench.py BUILD_DIR [--workers 1 2 4 8] [--repeats 3] [--model mlp]

"First completed step" is the same event for both: rank 0 prints a line right
after its first optimizer step (mirrored's chief with --log-every 1 prints
`step 1/N`; ddp_first_step.py prints `first step done`), and the clock stops
when this program reads that line from the launcher's pipe. The clock starts
just before the launcher is spawned. Each cell is the median of --repeats
runs, the launchers interleaved so that all see the same machine load. mirrored
runs with a new (empty) dataset cache and with a warm one (see measure()).
Then a breakdown of where the median run's time went, from the moment each
marker line was read (mirrored) or from rank 0's own timestamps (PyTorch).
"""
import argparse
import os
import re
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import shutil
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "..", "training", "torchrun_shim.py")
DDP = os.path.join(HERE, "ddp_first_step.py")

# Lines of mirrored's merged output that mark start-up phases, in order.
MIRRORED_MARKERS = [
    ("first task output", re.compile(r"^\[worker:\d+\] ")),
    ("coordination service up", re.compile(r"coordination service listening")),
    ("all tasks registered", re.compile(r"all \d+ tasks registered")),
    ("chief joined, Gloo next", re.compile(r"\[worker:0\] .*collectives \(Gloo\) bind")),
    ("data loaded, model built", re.compile(r"\[worker:0\] .*training \w+ on ")),
    ("first step", re.compile(r"^\[worker:0\] step 1/")),
]
TORCH_PHASES = ["python_started", "torch_imported", "process_group_ready", "data_loaded", "model_ready",
                "first_step"]


class RunFailed(Exception):
    pass


def run_once(argv, env, cwd, first_step, markers=(), timeout=300.0):
    """Runs argv to its end; returns (seconds to the first_step line, {marker: seconds}, {phase: unix time}, start unix time)."""
    seen, phases, lines = {}, {}, []
    wall0 = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = t0 + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    first = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunFailed("%s did not end within %.0f s; last lines:\n%s" % (argv[0], timeout, "\n".join(lines[-20:])))
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            now = time.monotonic() - t0
            if not chunk:
                break
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                lines.append(line)
                for name, rx in markers:
                    if name not in seen and rx.search(line):
                        seen[name] = now
                if first is None and first_step.search(line):
                    first = now
                m = re.match(r"phase (\w+) ([0-9.]+)$", line)
                if m:
                    phases[m.group(1)] = float(m.group(2))
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        sel.close()
    if rc != 0 or first is None:
        raise RunFailed("%s exited %d%s; last lines:\n%s" % (
            " ".join(argv[:3]), rc, "" if first else " without a first-step line", "\n".join(lines[-20:])))
    return first, seen, phases, wall0


def free_port():
    # torchrun's static rendezvous needs a port number up front; a port that
    # was free a moment ago is the best it can be given.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=3, help="steps each job runs (only the first is timed)")
    a = p.parse_args()
    launcher = os.path.join(os.path.abspath(a.build_dir), "bin", "mirrored-launch")
    if not os.access(launcher, os.X_OK):
        sys.exit("launch_bench: %s is missing or not executable: build the mirrored-launch and mirrored-worker "
                 "targets in %s first" % (launcher, a.build_dir))
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    tmp = tempfile.mkdtemp(prefix="launch-bench-")
    try:
        results = measure(a, launcher, env, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, results)


def measure(a, launcher, env, tmp):
    """mirrored runs twice per repeat: with a new, empty dataset cache (the
    first job on a machine, which inflates Fashion-MNIST once for all its
    workers) and with the cache a previous job left (every later job)."""
    warm_env = dict(env, MIRRORED_DATA_CACHE=os.path.join(tmp, "cache-warm"))

    def mirrored(n, run_dir, run_env):
        return run_once([launcher, "local", "--workers", str(n), "--cpu-replicas", "1", "--run-dir", run_dir, "--",
                         "--model", a.model, "--max-steps", str(a.steps), "--log-every", "1", "--no-validate"],
                        run_env, tmp, MIRRORED_MARKERS[-1][1], MIRRORED_MARKERS)

    mirrored(1, os.path.join(tmp, "warm-up"), warm_env)  # fills the warm cache; not timed
    results = {}
    for n in a.workers:
        cell = {"cold": [], "warm": [], "torch": []}
        for r in range(a.repeats):
            cold_env = dict(env, MIRRORED_DATA_CACHE=os.path.join(tmp, "cache-cold-%d-%d" % (n, r)))
            cell["cold"].append(mirrored(n, os.path.join(tmp, "c%d-%d" % (n, r)), cold_env))
            t = run_once(["/usr/bin/python3", SHIM, "--nproc_per_node", str(n), "--master_port", str(free_port()),
                          DDP, "--model", a.model, "--steps", str(a.steps), "--threads", "1"],
                         env, tmp, re.compile(r"^first step done$"))
            cell["torch"].append(t)
            cell["warm"].append(mirrored(n, os.path.join(tmp, "w%d-%d" % (n, r)), warm_env))
            print("# workers %d run %d: mirrored %.3f s (new cache) %.3f s (warm cache), torchrun %.3f s" % (
                n, r + 1, cell["cold"][-1][0], cell["warm"][-1][0], t[0]), file=sys.stderr, flush=True)
        results[n] = cell
    return results


def report(a, results):
    print("# time from invoking the launcher to the first completed training step, seconds (median of %d)" % a.repeats)
    print("# model %s, 1 CPU replica / thread per worker, %d cores, %s, %s" % (
        a.model, os.cpu_count(), time.strftime("%Y-%m-%d"), os.uname().machine))
    print("# mirrored new cache: the first job on the machine (inflates the dataset once for its workers);")
    print("# mirrored warm cache: any later job. ratio = torchrun / mirrored")
    print("%-8s %16s %17s %12s %12s %12s" % ("workers", "mirrored new s", "mirrored warm s", "torchrun s",
                                             "ratio new", "ratio warm"))
    for n, cell in results.items():
        cs = statistics.median(x[0] for x in cell["cold"])
        ws = statistics.median(x[0] for x in cell["warm"])
        ts = statistics.median(x[0] for x in cell["torch"])
        print("%-8d %16.3f %17.3f %12.3f %11.1fx %11.1fx" % (n, cs, ws, ts, ts / cs, ts / ws))

    print("\n# where the time goes, median run of each cell: seconds from the launcher's start until ...")
    names = [name for name, _ in MIRRORED_MARKERS]
    for kind in ("cold", "warm"):
        print("# mirrored, %s cache (when the marker line was read from the launcher's pipe)" % (
            "new" if kind == "cold" else "warm"))
        print("%-8s" % "workers" + "".join(" %24s" % x for x in names))
        for n, cell in results.items():
            runs = sorted(cell[kind], key=lambda x: x[0])
            _, seen, _, _ = runs[len(runs) // 2]
            print("%-8d" % n + "".join(" %24s" % ("%.3f" % seen[x] if x in seen else "-") for x in names))
    print("# torchrun + DDP (rank 0's own clock)")
    print("%-8s" % "workers" + "".join(" %20s" % x for x in TORCH_PHASES))
    for n, cell in results.items():
        runs = sorted(cell["torch"], key=lambda x: x[0])
        _, _, phases, wall0 = runs[len(runs) // 2]
        print("%-8d" % n + "".join(" %20s" % ("%.3f" % (phases[x] - wall0) if x in phases else "-")
                                    for x in TORCH_PHASES))


if __name__ == "__main__":
    main()
