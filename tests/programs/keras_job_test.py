#!/usr/bin/python3
"""keras_mwms_train.py, 2 workers and a SidecarEvaluator, under
mirrored-launch local with the pinned TensorFlow (scripts/interop-venv.sh).

  keras_job_test.py MIRRORED_LAUNCH evaluator   # trains; the evaluator follows the chief's checkpoints
  keras_job_test.py MIRRORED_LAUNCH restart     # worker:1 SIGKILLed in epoch 2 of 3: the launcher restarts
                                                # the job, BackupAndRestore resumes at epoch 2
  keras_job_test.py MIRRORED_LAUNCH keras3      # Keras 3's fit() still fails under the strategy (the docs say so)

Each checks the launcher's exit code, what the tasks printed, and that no
process of the job is left. Exits 77 (skipped) when the venv cannot be made.
"""
import os
import re
import signal
import sys
import tempfile

from program_job import ProgramJob, fail, leftover_processes, marked_program, venv_python

EPOCHS = 3
JOB_TIMEOUT_S = 150


def start(launcher, tmp, steps_per_epoch, *launcher_flags):
    program = [venv_python(), marked_program("keras_mwms_train.py", tmp), "--epochs", str(EPOCHS),
               "--steps-per-epoch", str(steps_per_epoch)]
    args = ["local", "--workers", "2", "--evaluator", "--run-dir", os.path.join(tmp, "run"), *launcher_flags,
            "--"] + program
    print("mirrored-launch " + " ".join(args), flush=True)
    return ProgramJob(launcher, args)


def lines_of(output, task):
    prefix = f"[{task}] "
    return [line[len(prefix):] for line in output.splitlines() if line.startswith(prefix)]


def check_trained(output, tmp):
    """Both workers ended epoch 3 with the same loss; the evaluator evaluated the last checkpoint."""
    finals = [next((l for l in lines_of(output, f"worker:{i}") if l.startswith(f"epoch {EPOCHS}/{EPOCHS}:")), None)
              for i in (0, 1)]
    if None in finals:
        fail(f"a worker did not finish epoch {EPOCHS}: {finals}", output)
    if finals[0] != finals[1]:
        fail(f"the workers disagree (not in sync): {finals}", output)
    evaluator = lines_of(output, "evaluator:0")
    if not any(l.startswith(f"evaluated checkpoint of epoch {EPOCHS} ") for l in evaluator):
        fail(f"the evaluator did not evaluate ckpt-{EPOCHS}", output)
    if "evaluator: done" not in evaluator:
        fail("the evaluator did not finish", output)
    checkpoint = os.path.join(tmp, "run", "keras", "checkpoints", f"ckpt-{EPOCHS}.index")
    if not os.path.exists(checkpoint):
        fail(f"the chief wrote no {checkpoint} under MIRRORED_RUN_DIR", output)
    print(f"ok: trained ({finals[0]}), evaluated: {[l for l in evaluator if l.startswith('evaluated')][-1]}")


def check_nothing_left(tmp, output):
    left = leftover_processes(tmp)
    if left:
        fail("processes of the job outlived the launcher:\n" + "\n".join(left), output)


def run_evaluator_case(launcher, tmp):
    job = start(launcher, tmp, 20)
    rc = job.wait(JOB_TIMEOUT_S)
    if rc != 0:
        fail(f"mirrored-launch exited {rc}, expected 0", job.output)
    check_trained(job.output, tmp)
    check_nothing_left(tmp, job.output)


def run_restart_case(launcher, tmp):
    job = start(launcher, tmp, 60, "--max-restarts", "1")
    job.wait_for_line(r"^\[worker:1\] epoch 1/3:", JOB_TIMEOUT_S)  # worker:1 is now in epoch 2
    victim = job.task_pid("worker", 1)
    os.kill(victim, signal.SIGKILL)
    print(f"SIGKILLed worker:1 (pid {victim}) in epoch 2", flush=True)
    rc = job.wait(JOB_TIMEOUT_S)
    out = job.output
    if rc != 0:
        fail(f"mirrored-launch exited {rc} after one restart, expected 0", out)
    if not re.search(r"first failure: task worker:1 ended with signal SIGKILL", out):
        fail("the failure report does not name worker:1 and SIGKILL", out)
    restart = out.find("restarting the job")
    if restart < 0 or "job succeeded after 1 restart" not in out:
        fail("the launcher did not restart the job once", out)
    if "restarting the job from the program's own checkpoints (it resumes itself: " \
       "TORCHELASTIC_RESTART_COUNT=1, MIRRORED_GENERATION=1)" not in out:
        fail("the restart line does not say the program resumes from its own checkpoints", out)
    before, after = out[:restart], out[restart:]
    if re.search(r"^\[worker:\d\] epoch 2/3:", before, re.M):
        fail("worker:1 was killed after epoch 2 ended; the test meant to kill it during epoch 2", out)
    for i in (0, 1):
        trained = [l.split(":")[0] for l in lines_of(after, f"worker:{i}") if l.startswith("epoch ")]
        if trained != ["epoch 2/3", "epoch 3/3"]:
            fail(f"worker:{i} after the restart trained {trained}, expected epochs 2 and 3 only", out)
        if not any(l.startswith("resuming at epoch 2/3") for l in lines_of(after, f"worker:{i}")):
            fail(f"worker:{i} does not say it resumed from the backup at epoch 2", out)
    check_trained(after, tmp)
    check_nothing_left(tmp, out)
    print("ok: restarted once, resumed at epoch 2 of 3, nothing left running")


def run_keras3_case(launcher, tmp):
    job = ProgramJob(launcher, ["local", "--workers", "2", "--run-dir", os.path.join(tmp, "run"), "--",
                                venv_python(), marked_program("keras3_mwms_fit.py", tmp)])
    rc = job.wait(JOB_TIMEOUT_S)
    out = job.output
    if rc == 0 or "fit done" in out:
        fail("Keras 3's fit() now works under MultiWorkerMirroredStrategy: update docs/user-programs.md", out)
    if "Attempt to convert a value (PerReplica" not in out:
        fail(f"mirrored-launch exited {rc}, but not with the PerReplica error the docs quote", out)
    check_nothing_left(tmp, out)
    print("ok: " + next(l for l in out.splitlines() if "tensorflow " in l and "keras " in l) +
          ": fit() fails with 'Attempt to convert a value (PerReplica...'")


CASES = {"evaluator": run_evaluator_case, "restart": run_restart_case, "keras3": run_keras3_case}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="keras-job-") as tmp:
        CASES[sys.argv[2]](sys.argv[1], tmp)


if __name__ == "__main__":
    main()
