#!/usr/bin/python3
"""torch_ddp_train.py, 2 processes, under mirrored-launch local and under
torchrun --standalone: both must reach the same final loss.

  torch_job_test.py MIRRORED_LAUNCH

Uses Debian's python3-torch through /usr/bin/python3, and Debian's torchrun
through bench/training/torchrun_shim.py (its own torchrun crashes on Python
3.11 before starting anything). Exits 77 (skipped) without torch.
"""
import os
import re
import subprocess
import sys
import tempfile

from program_job import HERE, SKIP, SOURCE_DIR, ProgramJob, fail, leftover_processes, marked_program

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(HERE, "torch_ddp_train.py")
TORCHRUN = [PYTHON, os.path.join(SOURCE_DIR, "bench", "training", "torchrun_shim.py")]
TOLERANCE = 1e-6
TIMEOUT_S = 90


def final_loss(output, who):
    found = re.findall(r"final loss (\S+)", output)
    if len(found) != 1:
        fail(f"{who}: expected one 'final loss' line (rank 0), got {found}", output)
    return float(found[0])


def main():
    launcher = sys.argv[1]
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no torch for /usr/bin/python3 (scripts/install-deps.sh --test installs python3-torch)")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory(prefix="torch-job-") as tmp:
        job = ProgramJob(launcher, ["local", "--workers", "2", "--run-dir", os.path.join(tmp, "run"), "--",
                                    PYTHON, marked_program("torch_ddp_train.py", tmp)])
        rc = job.wait(TIMEOUT_S)
        if rc != 0:
            fail(f"mirrored-launch exited {rc}, expected 0", job.output)
        ours = final_loss(job.output, "mirrored-launch")
        if leftover_processes(tmp):
            fail("processes of the job outlived the launcher", job.output)

        r = subprocess.run(TORCHRUN + ["--standalone", "--nproc_per_node", "2", SCRIPT], capture_output=True,
                           text=True, timeout=TIMEOUT_S, cwd=tmp)
        if r.returncode != 0:
            fail(f"torchrun exited {r.returncode}", r.stdout + r.stderr)
        theirs = final_loss(r.stdout, "torchrun")
    print(f"final loss: mirrored-launch {ours!r}, torchrun {theirs!r}")
    if abs(ours - theirs) > TOLERANCE:
        fail(f"the final losses differ by {abs(ours - theirs):.3g} (more than {TOLERANCE})")
    print("ok: the same final loss under both launchers")


if __name__ == "__main__":
    main()
