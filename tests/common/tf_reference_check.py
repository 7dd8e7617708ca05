#!/usr/bin/env python3
"""Developer tool (not run by CI): feeds the same TF_CONFIG and Slurm cases to
TensorFlow's TFConfigClusterResolver / SlurmClusterResolver (plus the
validation MultiWorkerMirroredStrategy applies, multi_worker_util.
_validate_cluster_spec) and to `mirrored-launch explain --json`, and prints
both side by side so that every difference is visible.

    pip install tensorflow-cpu
    python3 tests/common/tf_reference_check.py --bin build/bin/mirrored-launch

The differences we keep on purpose are listed at the top of
common/cluster/tf_config_parser.h and common/cluster/slurm_resolver.h.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TF_CONFIG_CASES = [
    ("readme two workers",
     {"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker", "index": 1}}),
    ("chief + workers + evaluator, this = worker:1",
     {"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "evaluator": ["e:1"]},
      "task": {"type": "worker", "index": 1}}),
    ("evaluator left out of cluster",
     {"cluster": {"worker": ["w0:1"]}, "task": {"type": "evaluator", "index": 0}}),
    ("index missing", {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker"}}),
    ("no cluster", {"task": {"type": "worker", "index": 0}}),
    ("empty", {}),
    ("ps job", {"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}}),
    ("ps task", {"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "ps", "index": 0}}),
    ("index out of range", {"cluster": {"worker": ["h1:2222", "h2:2222"]},
                            "task": {"type": "worker", "index": 3}}),
    ("two chiefs", {"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}),
    ("two evaluators", {"cluster": {"worker": ["w:1"], "evaluator": ["a:1", "b:1"]},
                        "task": {"type": "worker", "index": 0}}),
    ("task type not in cluster", {"cluster": {"worker": ["w:1"]}, "task": {"type": "chief", "index": 0}}),
    ("unknown job", {"cluster": {"master": ["m:1"]}, "task": {"type": "master", "index": 0}}),
    ("port out of range", {"cluster": {"worker": ["h1:99999"]}, "task": {"type": "worker", "index": 0}}),
    ("no port", {"cluster": {"worker": ["h1"]}, "task": {"type": "worker", "index": 0}}),
    ("duplicate address", {"cluster": {"worker": ["h1:1", "h1:1"]}, "task": {"type": "worker", "index": 0}}),
    ("sparse job", {"cluster": {"worker": {"0": "w:1", "3": "w3:1"}}, "task": {"type": "worker", "index": 3}}),
    ("dense map job, out of order",
     {"cluster": {"worker": {"1": "w1:1", "0": "w0:1"}}, "task": {"type": "worker", "index": 1}}),
    ("map job, keys as int() reads them",
     {"cluster": {"worker": {" 1 ": "w1:1", "+0": "w0:1", "0_2": "w2:1"}}, "task": {"type": "worker", "index": 2}}),
    ("map job, key not an index", {"cluster": {"worker": {"0": "w:1", "a": "w2:1"}},
                                   "task": {"type": "worker", "index": 0}}),
    ("map job, two keys for one index", {"cluster": {"worker": {"0": "w:1", "1": "w1:1", "01": "w2:1"}},
                                         "task": {"type": "worker", "index": 0}}),
    ("index '+1'", {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": "+1"}}),
    ("index ' 1 '", {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": " 1 "}}),
    ("index '1_0'", {"cluster": {"worker": ["w%d:1" % i for i in range(11)]},
                     "task": {"type": "worker", "index": "1_0"}}),
    ("index '1e0'", {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": "1e0"}}),
    ("index true", {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": True}}),
    ("rpc_layer grpc+verbs", {"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0},
                              "rpc_layer": "grpc+verbs"}),
    ("unknown key", {"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0}, "x": 1}),
    ("task missing", {"cluster": {"worker": ["w:1", "w2:1"]}}),
]

SLURM_CASES = [
    ("2 nodes x 2 tasks, rank 3",
     {"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_STEP_NUM_TASKS": "4",
      "SLURM_STEP_NODELIST": "node[01-02]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}),
    ("uneven nodes, zero padding",
     {"SLURM_PROCID": "4", "SLURM_STEP_NUM_TASKS": "8",
      "SLURM_STEP_NODELIST": "node[01-03,07]", "SLURM_STEP_TASKS_PER_NODE": "3(x2),1,1"}),
    ("node9 and node10 (sort order)",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2",
      "SLURM_STEP_NODELIST": "node[9-10]", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}),
    ("issue host list",
     {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "6",
      "SLURM_STEP_NODELIST": "node[01-03,07],gpu-a[1-2]", "SLURM_STEP_TASKS_PER_NODE": "1(x6)"}),
    ("suffix after brackets",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2",
      "SLURM_STEP_NODELIST": "n[1-2]-ib", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}),
    ("two bracket groups",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "4",
      "SLURM_STEP_NODELIST": "a[1-2]b[3-4]", "SLURM_STEP_TASKS_PER_NODE": "1(x4)"}),
    ("host listed twice",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2",
      "SLURM_STEP_NODELIST": "a,a", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}),
    ("task total mismatch",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3",
      "SLURM_STEP_NODELIST": "a,b", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}),
    ("job variables only",
     {"SLURM_PROCID": "1", "SLURM_NTASKS": "2",
      "SLURM_JOB_NODELIST": "c1", "SLURM_TASKS_PER_NODE": "2"}),
    ("descending range",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1",
      "SLURM_STEP_NODELIST": "n[5-3]", "SLURM_STEP_TASKS_PER_NODE": "1"}),
]


def clean_env():
    for k in list(os.environ):
        if k == "TF_CONFIG" or k.startswith("SLURM_"):
            del os.environ[k]


def tf_tfconfig(tf_config):
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.distribute.cluster_resolver import TFConfigClusterResolver
    clean_env()
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    try:
        r = TFConfigClusterResolver()
        spec = r.cluster_spec()
        out = {"cluster": spec.as_dict(), "task": "%s:%s" % (r.task_type, r.task_id),
               "rpc_layer": r.rpc_layer}
        if spec.jobs:
            try:
                multi_worker_util._validate_cluster_spec(spec, r.task_type, r.task_id)
                out["mwms_validate"] = "ok"
                out["leader"] = multi_worker_util.collective_leader(spec, r.task_type, r.task_id)
            except Exception as e:  # what MultiWorkerMirroredStrategy would raise
                out["mwms_validate"] = "%s: %s" % (type(e).__name__, e)
        return out
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}


def tf_slurm(env):
    from tensorflow.python.distribute.cluster_resolver import SlurmClusterResolver
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as scr
    clean_env()
    os.environ.update(env)
    try:
        per_node = env.get("SLURM_STEP_TASKS_PER_NODE", "1")
        width = max(scr.expand_tasks_per_node(per_node))
        r = SlurmClusterResolver(gpus_per_node=width, gpus_per_task=1, auto_set_gpu=False)
        spec = r.cluster_spec()
        return {"cluster": spec.as_dict(), "task": "%s:%s" % (r.task_type, r.task_id)}
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}


def ours(binary, args, env):
    clean_env()
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    run_env.update(env)
    p = subprocess.run([binary, "explain", "--json"] + args, env=run_env,
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return {"exit": p.returncode, "error": p.stderr.strip()}
    j = json.loads(p.stdout)
    cluster = {}
    for t in j["tasks"]:
        if t["address"] is not None:
            cluster.setdefault(t["type"], []).append(t["address"])
    out = {"cluster": cluster, "task": j["this_task"]["task"] if j["this_task"] else None,
           "chief": j["coordination_service"]["task"] if j["coordination_service"] else None,
           "training_order": [t["task"] for t in j["tasks"] if t["rank"] is not None]}
    if j["warnings"]:
        out["warnings"] = j["warnings"]
    return out


def show(title, tf, me):
    print("=" * 78)
    print(title)
    print("  TensorFlow: " + json.dumps(tf, sort_keys=True))
    print("  mirrored:   " + json.dumps(me, sort_keys=True))
    tf_rejects = "error" in tf or tf.get("mwms_validate", "ok") != "ok"
    we_reject = "error" in me
    if tf_rejects and we_reject:
        verdict = "both reject"
    elif tf_rejects:
        verdict = "DIFFERENT: TF rejects, mirrored accepts"
    elif we_reject:
        verdict = "DIFFERENT: TF accepts, mirrored rejects"
    elif tf["cluster"] != me["cluster"] or tf["task"] != me["task"]:
        verdict = "DIFFERENT: other cluster or task"
    else:
        verdict = "same cluster and task"
    print("  verdict:    " + verdict)

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="build/bin/mirrored-launch")
    args = parser.parse_args()
    import tensorflow as tf
    print("tensorflow", tf.__version__)
    for title, cfg in TF_CONFIG_CASES:
        show("TF_CONFIG: " + title + "\n  " + json.dumps(cfg), tf_tfconfig(cfg),
             ours(args.bin, [], {"TF_CONFIG": json.dumps(cfg)}))
    for title, env in SLURM_CASES:
        show("Slurm: " + title + "\n  " + json.dumps(env), tf_slurm(env),
             ours(args.bin, ["--from-slurm"], env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
