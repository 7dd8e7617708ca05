#!/usr/bin/env python3
"""A stand-in for a user's TensorFlow or torch script under mirrored-launch.

It reads what mirrored-launch gives a user's program (TF_CONFIG, the
torch.distributed variables, MIRRORED_RUN_DIR) and behaves as --mode says:
  meet           every worker listens on its TF_CONFIG port (as TensorFlow's
                 gRPC server does: SO_REUSEADDR) and connects to the others';
                 prints what it got, exits 0
  usage          exits 2 at once (a bad flag)
  fail-first     generation 0: worker 1 writes a torch-style error file and
                 exits 1; later generations succeed
  hang           sleeps without a word (a task stuck in a collective)
"""
import argparse
import json
import os
import socket
import sys
import time

CONNECT_DEADLINE_S = 20.0


def meet(tf_config):
    """Listens on this task's address and reaches every other worker's."""
    workers = tf_config["cluster"]["worker"]
    me = tf_config["task"]["index"]
    host, port = workers[me].rsplit(":", 1)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host, int(port)))  # a bind error here is what the test looks for
    except OSError:
        import subprocess
        print(subprocess.run(["ss", "-tanpe", f"( sport = :{port} or dport = :{port} )"], capture_output=True, text=True).stdout, flush=True)
        raise
    server.listen(len(workers))
    server.settimeout(0.05)
    reached = set()
    deadline = time.monotonic() + CONNECT_DEADLINE_S
    while len(reached) < len(workers) - 1 and time.monotonic() < deadline:
        for i, address in enumerate(workers):
            if i == me or i in reached:
                continue
            h, p = address.rsplit(":", 1)
            try:
                socket.create_connection((h, int(p)), timeout=0.5).close()
                reached.add(i)
            except OSError:
                pass
        try:
            server.accept()[0].close()
        except OSError:
            pass
    if len(reached) < len(workers) - 1:
        print(f"could not reach every worker: {sorted(reached)}", flush=True)
        sys.exit(1)
    # The others may still be connecting to us: stay a moment for them.
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        try:
            server.accept()[0].close()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="meet")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    tf_config = json.loads(os.environ["TF_CONFIG"])
    task = tf_config["task"]
    name = f'{task["type"]}:{task["index"]}'
    seen = {k: os.environ.get(k) for k in
            ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RESTART_COUNT", "MIRRORED_RUN_DIR", "MIRRORED_JOB_TOKEN")}
    print(f"{name} tag={args.tag} " + " ".join(f"{k}={v}" for k, v in seen.items()), flush=True)
    generation = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
    if args.mode == "usage":
        print("user_program.py: error: unrecognized arguments", file=sys.stderr)
        sys.exit(2)
    if args.mode == "hang":
        time.sleep(120)
    if args.mode == "fail-first" and generation == 0 and task["index"] == 1 and task["type"] == "worker":
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            json.dump({"message": {"message": "RuntimeError: the loss is NaN at step 7",
                                   "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "0"}}}, f)
        sys.exit(1)
    if task["type"] != "evaluator" and args.mode in ("meet", "fail-first"):
        meet(tf_config)
    print(f"{name} done", flush=True)


if __name__ == "__main__":
    main()
