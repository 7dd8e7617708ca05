#!/usr/bin/python3
"""A user's TensorFlow and torch programs (tests/programs/) under
mirrored-launch, against the way they run without it, on this machine.

  /usr/bin/python3 bench/programs/program_bench.py BUILD_DIR [--repeats 3] [--cap 120]

(a) seconds from starting the job to rank 0's "first step done" line:
    Keras MultiWorkerMirroredStrategy, 2 workers, under `mirrored-launch
    local` vs the 2 processes started by hand with their own TF_CONFIGs
    (the tutorial's way); torch DDP, 2 processes, under mirrored-launch vs
    torchrun --standalone (Debian's, through torchrun_shim.py).
(b) SIGKILL one TF worker 2 s after its first step: seconds until the whole
    job has ended: mirrored-launch's exit vs the surviving hand-started
    worker's exit, capped at --cap (then reported as "> cap").
Each cell is the median of --repeats runs, the two sides interleaved.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = os.path.join(SOURCE, "tests", "programs")
KERAS = os.path.join(PROGRAMS, "keras_mwms_train.py")
TORCH = os.path.join(PROGRAMS, "torch_ddp_train.py")
TORCHRUN = ["/usr/bin/python3", os.path.join(SOURCE, "bench", "training", "torchrun_shim.py")]


class Proc:
    """A process in its own session whose output lines are stamped as they come."""

    def __init__(self, argv, env=None, cwd=None):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True)
        self.lines, self.cond = [], threading.Condition()
        self.ended_at = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()
        self.p.wait()
        with self.cond:
            self.ended_at = time.monotonic()
            self.cond.notify_all()

    def wait_line(self, needle, timeout_s):
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                for t, line in self.lines:
                    if needle in line:
                        return t
                if self.ended_at is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"no {needle!r} line; last lines:\n" +
                                       "\n".join(l for _, l in self.lines[-15:]))
                self.cond.wait(0.2)

    def wait_end(self, timeout_s):
        """Monotonic time it ended, or None if it still runs after timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self.ended_at is None and time.monotonic() < deadline:
                self.cond.wait(0.2)
            return self.ended_at

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def tf_env(tmp, workers, index):
    env = dict(os.environ, MIRRORED_RUN_DIR=tmp, OMP_NUM_THREADS="1")
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in workers]},
                                   "task": {"type": "worker", "index": index}})
    return env


def keras_args(python, steps):
    return [python, KERAS, "--epochs", "1", "--steps-per-epoch", str(steps)]


def launched(args, tmp):
    return ["local", "--workers", "2", "--run-dir", os.path.join(tmp, "run"), "--"] + args


def first_step_tf_launcher(launch, python, tmp):
    p = Proc([launch] + launched(keras_args(python, 5), tmp))
    try:
        return p.wait_line("[worker:0] first step done", 300) - p.t0
    finally:
        p.wait_end(120) or p.kill()


def first_step_tf_by_hand(python, tmp):
    ports = free_ports(2)
    t0 = time.monotonic()
    procs = [Proc(keras_args(python, 5), env=tf_env(tmp, ports, i)) for i in range(2)]
    try:
        return procs[0].wait_line("first step done", 300) - t0
    finally:
        for p in procs:
            p.wait_end(120) or p.kill()


def first_step_torch_launcher(launch, tmp):
    p = Proc([launch] + launched(["/usr/bin/python3", TORCH, "--epochs", "1"], tmp))
    try:
        return p.wait_line("[worker:0] first step done", 300) - p.t0
    finally:
        p.wait_end(120) or p.kill()


def first_step_torchrun(tmp):
    p = Proc(TORCHRUN + ["--standalone", "--nproc_per_node", "2", TORCH, "--epochs", "1"], cwd=tmp)
    try:
        return p.wait_line("first step done", 300) - p.t0
    finally:
        p.wait_end(120) or p.kill()


def child_running(parent_pid, index):
    out = subprocess.run(["pgrep", "-P", str(parent_pid)], capture_output=True, text=True).stdout.split()
    for pid in out:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for v in f.read().decode(errors="replace").split("\0"):
                if v.startswith("TF_CONFIG=") and json.loads(v[10:])["task"]["index"] == index:
                    return int(pid)
    raise RuntimeError(f"no child runs worker:{index}")


def kill_tf_launcher(launch, python, tmp, victim, cap):
    p = Proc([launch] + launched(keras_args(python, 100000), tmp))
    try:
        p.wait_line(f"[worker:{victim}] first step done", 300)
        time.sleep(2)
        os.kill(child_running(p.p.pid, victim), signal.SIGKILL)
        killed = time.monotonic()
        ended = p.wait_end(cap)
        return None if ended is None else ended - killed
    finally:
        p.kill()


def kill_tf_by_hand(python, tmp, victim, cap):
    ports = free_ports(2)
    procs = [Proc(keras_args(python, 100000), env=tf_env(tmp, ports, i)) for i in range(2)]
    try:
        procs[victim].wait_line("first step done", 300)
        time.sleep(2)
        procs[victim].kill()
        killed = time.monotonic()
        ended = procs[1 - victim].wait_end(cap)
        return None if ended is None else ended - killed
    finally:
        for p in procs:
            p.kill()


def cell(values, cap=None):
    done = [v for v in values if v is not None]
    if len(done) < len(values):
        return f"> {cap:.0f} ({len(values) - len(done)}/{len(values)} runs)"
    return f"{statistics.median(done):.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--skip", nargs="*", default=[], choices=["first-step", "kill"])
    a = ap.parse_args()
    launch = os.path.join(a.build_dir, "bin", "mirrored-launch")
    python = subprocess.run([os.path.join(SOURCE, "scripts", "interop-venv.sh")], capture_output=True, text=True,
                            check=True).stdout.strip()
    print(f"# programs: {os.path.relpath(KERAS, SOURCE)}, {os.path.relpath(TORCH, SOURCE)}; 2 workers, 1 host, "
          f"CPU ({os.cpu_count()} cores); median of {a.repeats}")
    tf_version = subprocess.run([python, "-c", "import tensorflow as tf; print(tf.__version__)"],
                                capture_output=True, text=True).stdout.strip()
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    print(f"# TensorFlow {tf_version} (tf_keras), torch {torch_version}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="program-bench-") as root:
        def tmp():
            return tempfile.mkdtemp(dir=root)
        if "first-step" not in a.skip:
            tf_l, tf_h, t_l, t_r = [], [], [], []
            for _ in range(a.repeats):
                tf_l.append(first_step_tf_launcher(launch, python, tmp()))
                tf_h.append(first_step_tf_by_hand(python, tmp()))
                t_l.append(first_step_torch_launcher(launch, tmp()))
                t_r.append(first_step_torchrun(tmp()))
            rows.append(("launch to first step (s)", "Keras MWMS", cell(tf_l), "by hand, own TF_CONFIGs",
                         cell(tf_h)))
            rows.append(("launch to first step (s)", "torch DDP", cell(t_l), "torchrun --standalone", cell(t_r)))
        if "kill" not in a.skip:
            for victim in (1, 0):
                l, h = [], []
                for _ in range(a.repeats):
                    l.append(kill_tf_launcher(launch, python, tmp(), victim, a.cap))
                    h.append(kill_tf_by_hand(python, tmp(), victim, a.cap))
                rows.append((f"worker:{victim} SIGKILLed: job ended after (s)", "Keras MWMS", cell(l, a.cap),
                             "by hand: the other worker exits", cell(h, a.cap)))
    print(f"# {'measure':<44} {'program':<11} {'mirrored-launch':>16}   {'without it':<33} {'s':>12}")
    for measure, program, ours, peer, theirs in rows:
        print(f"  {measure:<44} {program:<11} {ours:>16}   {peer:<33} {theirs:>12}")


if __name__ == "__main__":
    sys.exit(main())
