#!/usr/bin/python3
"""What mirrored-launch does with a user's program that cannot run:

  - one that exits 2 on a bad flag (torch_ddp_train.py --epochs 0) is not
    restarted, even with --max-restarts 2: the launcher exits 2 and says so;
  - one that does not exist, or is not executable: the launcher exits 2
    naming it, before starting any task.

  launch_errors_test.py MIRRORED_LAUNCH
"""
import os
import stat
import subprocess
import sys
import tempfile

from program_job import SKIP, ProgramJob, fail, leftover_processes, marked_program

TIMEOUT_S = 60


def bad_flag_is_not_restarted(launcher, tmp):
    job = ProgramJob(launcher, ["local", "--workers", "2", "--max-restarts", "2", "--run-dir",
                                os.path.join(tmp, "bad-flag"), "--", sys.executable,
                                marked_program("torch_ddp_train.py", tmp), "--epochs", "0"])
    rc = job.wait(TIMEOUT_S)
    out = job.output
    if rc != 2:
        fail(f"a program exiting 2: mirrored-launch exited {rc}, expected 2", out)
    if "restarting the job" in out:
        fail("a program exiting 2 (bad usage) was restarted", out)
    if "not restart" not in out:
        fail("the launcher does not say that it did not restart the job", out)
    if leftover_processes(tmp):
        fail("processes of the job outlived the launcher", out)
    print("ok: exit 2 not restarted: " + next(l for l in out.splitlines() if "not restart" in l))


def unrunnable_program_is_named(launcher, tmp, program, why):
    r = subprocess.run([launcher, "local", "--workers", "2", "--run-dir", os.path.join(tmp, "unrunnable"), "--",
                        program, "--epochs", "1"], capture_output=True, text=True, timeout=TIMEOUT_S)
    out = r.stdout + r.stderr
    if r.returncode != 2:
        fail(f"a program that {why}: mirrored-launch exited {r.returncode}, expected 2", out)
    if program not in out:
        fail(f"a program that {why}: the message does not name {program}", out)
    if "[worker:" in out:
        fail(f"a program that {why}: tasks were started", out)
    print(f"ok: a program that {why}: exit 2: " + out.strip().splitlines()[-1])


def main():
    launcher = sys.argv[1]
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no torch for /usr/bin/python3 (scripts/install-deps.sh --test installs python3-torch)")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory(prefix="launch-errors-") as tmp:
        bad_flag_is_not_restarted(launcher, tmp)
        unrunnable_program_is_named(launcher, tmp, os.path.join(tmp, "no-such-train.py"), "does not exist")
        not_executable = os.path.join(tmp, "train.py")
        with open(not_executable, "w") as f:
            f.write("print('never run')\n")
        os.chmod(not_executable, stat.S_IRUSR | stat.S_IWUSR)
        unrunnable_program_is_named(launcher, tmp, not_executable, "is not executable")
        unrunnable_program_is_named(launcher, tmp, "no-such-python3", "is not on PATH")


if __name__ == "__main__":
    main()
