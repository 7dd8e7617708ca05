"""What the interop tests share: the pinned TensorFlow venv, a job of
mirrored-launch run with a deadline, its output read as it comes, and the
check that no process of a job outlives it.

  job = ProgramJob(launcher, ["local", "--workers", "2", "--", python, marked_program("train.py", tmp)])
  job.wait_for_line(r"^\\[worker:1\\] epoch 1/", timeout_s=120)
  rc = job.wait(timeout_s=120)
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

SKIP = 77  # the tests' SKIP_RETURN_CODE
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def fail(message, output=""):
    if output:
        print("---- job output (last 60 lines) ----\n" + "\n".join(output.splitlines()[-60:]), file=sys.stderr)
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def venv_python():
    """The pinned TensorFlow's python; exits SKIP when pip cannot reach PyPI."""
    script = os.path.join(SOURCE_DIR, "scripts", "interop-venv.sh")
    r = subprocess.run([script], capture_output=True, text=True)
    if r.returncode == 3:
        print(r.stderr + "SKIP: no TensorFlow venv (pip cannot reach PyPI)", file=sys.stderr)
        sys.exit(SKIP)
    if r.returncode != 0:
        fail(f"{script} exited {r.returncode}:\n{r.stderr}")
    return r.stdout.strip()


def marked_program(name, tmp):
    """tests/programs/NAME through a link in the test's own temporary directory:
    the directory's unique name on the tasks' command lines lets pgrep find them."""
    link = os.path.join(tmp, name)
    os.symlink(os.path.join(HERE, name), link)
    return link


def leftover_processes(tmp):
    """The command lines of processes that still run a program from `tmp`."""
    r = subprocess.run(["pgrep", "-af", "--", tmp], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if "pgrep" not in line]


class ProgramJob:
    """mirrored-launch ARGS, its output merged, kept, and readable as it comes."""

    def __init__(self, launcher, args, env=None):
        self.lines, self._cond = [], threading.Condition()
        self.proc = subprocess.Popen([launcher] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def output(self):
        with self._cond:
            return "\n".join(self.lines)

    def wait_for_line(self, pattern, timeout_s):
        """The first line matching `pattern`; fails the test past the deadline or at the job's end."""
        regex, deadline = re.compile(pattern), time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    break
                self._cond.wait(min(left, 0.2))
        self.kill()
        fail(f"no line matching {pattern!r} within {timeout_s} s", self.output)

    def wait(self, timeout_s):
        """The launcher's exit code; fails the test (after killing the job) past the deadline."""
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            fail(f"the job did not end within {timeout_s} s", self.output)
        self._reader.join(10)
        return rc

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the launcher; its tasks die with it
        except ProcessLookupError:
            pass
        self.proc.wait()

    def task_pid(self, task_type, index):
        """The pid of the launcher's child that runs task_type:index (from its TF_CONFIG)."""
        children = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        for pid in children.stdout.split():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            for v in env:
                if v.startswith("TF_CONFIG=") and json.loads(v[10:])["task"] == {"type": task_type, "index": index}:
                    return int(pid)
        fail(f"no child of the launcher runs {task_type}:{index}", self.output)
