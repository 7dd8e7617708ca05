"""mirrored-worker's learning-rate schedules against Keras' and PyTorch's own.

    schedule_interop.py SCHEDULE_TABLE keras|torch

Runs SCHEDULE_TABLE (schedule_table.cc) for each case and compares every
step's rate with the library's schedule object. Keras computes in its
initial rate's dtype: given as a float64 tensor, the whole schedule is
float64 (in float32 its 0.97 is 0.97000003, and 0.97^t drifts by t x 3e-8).
PyTorch's schedulers compute in Python floats, CosineAnnealingLR by a
recurrence. Prints one line per case; exit 1 on a mismatch.
"""
import math
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
table_bin, library = sys.argv[1], sys.argv[2]

# (name, (steps per epoch, total steps, replicas, last step), worker flags, Keras schedule, PyTorch scheduler)
# The Keras factory takes the schedules module and f64, which makes a float64 rate.
# The PyTorch factory takes an optimizer whose lr is the peak, and is stepped
# once per optimizer step; None where PyTorch has no scheduler that matches.
CASES = [
    ("cosine, warm-up, alpha", (50, 110, 1, 140),
     ["--lr-schedule", "cosine", "--lr", "0.1", "--warmup-steps", "10", "--lr-decay-steps", "100", "--lr-alpha", "0.1"],
     lambda k, f64: k.CosineDecay(f64(0.0), 100, alpha=0.1, warmup_target=f64(0.1), warmup_steps=10),
     None),
    ("cosine, run-long default", (50, 200, 1, 200),
     ["--lr-schedule", "cosine", "--lr", "0.01"],
     lambda k, f64: k.CosineDecay(f64(0.01), 200),
     lambda t, opt: t.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=200)),
    ("cosine, alpha", (50, 80, 1, 80),
     ["--lr-schedule", "cosine", "--lr", "0.2", "--lr-alpha", "0.25"],
     lambda k, f64: k.CosineDecay(f64(0.2), 80, alpha=0.25),
     lambda t, opt: t.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=80, eta_min=0.05)),
    ("exponential", (50, 100, 1, 200),
     ["--lr-schedule", "exponential", "--lr", "0.001", "--lr-decay-steps", "30", "--lr-decay-rate", "0.9"],
     lambda k, f64: k.ExponentialDecay(f64(0.001), 30, f64(0.9)),
     None),
    ("exponential per step", (50, 100, 1, 100),
     ["--lr-schedule", "exponential", "--lr", "0.001", "--lr-decay-steps", "1", "--lr-decay-rate", "0.97"],
     lambda k, f64: k.ExponentialDecay(f64(0.001), 1, f64(0.97)),
     lambda t, opt: t.optim.lr_scheduler.ExponentialLR(opt, gamma=0.97)),
    ("step, scaled by 4 replicas", (25, 100, 4, 120),
     ["--lr-schedule", "step", "--lr", "0.05", "--lr-decay-rate", "0.5", "--scale-lr-by-replicas"],
     lambda k, f64: k.ExponentialDecay(f64(0.2), 25, f64(0.5), staircase=True),
     lambda t, opt: t.optim.lr_scheduler.StepLR(opt, step_size=25, gamma=0.5)),
]


def ours(shape, flags):
    args = [table_bin] + [str(x) for x in shape] + ["--"] + flags
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [float(line.split()[1]) for line in out.splitlines()]


def keras_rates(factory, steps):
    import tensorflow as tf
    import tf_keras
    schedule = factory(tf_keras.optimizers.schedules, lambda x: tf.constant(x, tf.float64))
    return [float(schedule(step)) for step in range(steps)]


def torch_rates(factory, peak, steps):
    import torch
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=peak)
    scheduler = factory(torch, opt)
    rates = []
    for _ in range(steps):
        rates.append(opt.param_groups[0]["lr"])  # the rate this step's update uses
        opt.step()
        scheduler.step()
    return rates


# Float64 both sides; PyTorch's cosine recurrence adds its rounding each step.
TOLERANCE = {"keras": 1e-12, "torch": 1e-9}

failed = 0
for name, shape, flags, keras_factory, torch_factory in CASES:
    mine = ours(shape, flags)
    if library == "keras":
        theirs = keras_rates(keras_factory, len(mine))
    elif torch_factory is None:
        continue
    else:
        # CosineAnnealingLR rises again after T_max: compare up to it.
        count = min(len(mine), shape[1] + 1)
        mine = mine[:count]
        theirs = torch_rates(torch_factory, mine[0], count)
    # Near a rate of 0, relative to the peak.
    floor = 1e-9 * max(theirs)
    worst = max(abs(a - b) / (abs(b) + floor) for a, b in zip(mine, theirs))
    ok = worst <= TOLERANCE[library] and len(mine) == len(theirs)
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: {name}: {len(mine)} steps, worst relative difference {worst:.2g} vs {library}")
    if not ok:
        for step, (a, b) in enumerate(zip(mine, theirs)):
            if abs(a - b) > TOLERANCE[library] * (abs(b) + floor):
                print(f"  step {step}: mirrored {a!r}, {library} {b!r}")
sys.exit(1 if failed else 0)
