#!/usr/bin/env python3
"""Resolves deploy/kubernetes/*.yaml the way the cluster would, with the real
mirrored-launch, so that the manifests and the launcher cannot drift apart:

- tfjob.yaml: rebuilds the TF_CONFIG Kubeflow's training operator writes for
  every replica (genClusterSpec in kubeflow/training-operator,
  pkg/controller.v1/tensorflow: job types lower-cased, address
  <job>-<type>-<index>.<namespace>.svc:<port of the container 'tensorflow'
  named 'tfjob-port', default 2222>, the evaluator included in the cluster by
  current operators and left out by old ones: both are checked) and checks
  `mirrored-launch explain --json` on it;
- indexed-job.yaml: gives each pod the variables Kubernetes and the manifest
  set (JOB_COMPLETION_INDEX, HOSTNAME <job>-<index>, downward-API fields) and
  checks `explain --from-k8s-indexed-job --json` against the DNS names the
  headless Service publishes;
- both: runs each container's own args through `mirrored-launch ... --dry-run`
  with the real mirrored-worker, so that every flag in the manifests is one
  the launcher accepts, and every worker flag (after `--`) one the worker
  accepts (--dry-run runs it with --check-flags, which starts nothing).

  python3 tests/deploy/resolve_manifests_test.py build/bin/mirrored-launch [deploy/kubernetes]
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:  # PyYAML from PyPI when the interpreter lacks it
    import subprocess
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "pyyaml"], check=True)
    import yaml

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def run(launcher, args, env):
    full_env = {"PATH": "/usr/bin:/bin", **env}
    p = subprocess.run([launcher, *args], env=full_env, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def explain(launcher, args, env, what):
    rc, out, err = run(launcher, ["explain", "--json", *args], env)
    if not check(rc == 0, f"{what}: explain exited {rc}: {err.strip()}"):
        return None
    check("warning" not in err, f"{what}: explain warned: {err.strip()}")
    return json.loads(out)


def dry_run(launcher, args, env, worker, what):
    """The container's own args, with --dry-run and the worker binary `worker`."""
    check(args[:1] == ["cluster"], f"{what}: args must start with 'cluster'")
    rc, out, err = run(launcher, [args[0], "--dry-run", "--worker-binary", worker, *args[1:]],
                       {**env, "MIRRORED_JOB_TOKEN": "x" * 32})
    if check(rc == 0, f"{what}: `mirrored-launch {' '.join(args)}` rejected: {err.strip()}"):
        worker_args = args[args.index("--") + 1:]
        check(" ".join(worker_args) in out, f"{what}: dry run does not pass the worker arguments {worker_args}:\n{out}")
        # With the real mirrored-worker, the dry run checks the workers' own flags too.
        check(f"# worker flags: checked by {worker} --check-flags" in out,
              f"{what}: the worker flags were not checked:\n{out}")
    return out


def tf_config_port(template):
    for c in template["spec"]["containers"]:
        if c["name"] == "tensorflow":
            for p in c.get("ports") or []:
                if p.get("name") == "tfjob-port":
                    return p["containerPort"]
    return 2222


def operator_cluster(tfjob, include_evaluator):
    name = tfjob["metadata"]["name"]
    namespace = tfjob["metadata"].get("namespace", "default")
    cluster = {}
    for rtype, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        if rtype == "Evaluator" and not include_evaluator:
            continue
        rt = rtype.lower()
        port = tf_config_port(spec["template"])
        cluster[rt] = [f"{name}-{rt}-{i}.{namespace}.svc:{port}" for i in range(spec.get("replicas", 1))]
    return cluster


def check_tfjob(launcher, tfjob, worker):
    specs = tfjob["spec"]["tfReplicaSpecs"]
    for include_evaluator in (True, False):
        cluster = operator_cluster(tfjob, include_evaluator)
        training = cluster.get("chief", []) + cluster.get("worker", [])
        chief_type = "chief" if "chief" in cluster else "worker"
        for rtype, spec in specs.items():
            for i in range(spec.get("replicas", 1)):
                rt = rtype.lower()
                tf_config = json.dumps({"cluster": cluster, "task": {"type": rt, "index": i},
                                        "environment": "cloud"})
                what = f"TFJob {rtype}-{i} (evaluator {'in' if include_evaluator else 'not in'} cluster)"
                got = explain(launcher, [], {"TF_CONFIG": tf_config}, what)
                if got is None:
                    continue
                rows = [t for t in got["tasks"] if t["role"] != "evaluator"]
                check([t["address"] for t in rows] == training,
                      f"{what}: training addresses {[t['address'] for t in rows]} != {training}")
                check([t["rank"] for t in rows] == list(range(len(training))), f"{what}: ranks not 0..n-1")
                check(got["coordination_service"]["task"] == f"{chief_type}:0" and
                      got["coordination_service"]["address"] == cluster[chief_type][0],
                      f"{what}: coordination service {got['coordination_service']}")
                check(got["this_task"]["task"] == f"{rt}:{i}", f"{what}: this task {got['this_task']['task']}")
                check(got["num_training_tasks"] == len(training), f"{what}: {got['num_training_tasks']} tasks")
                if rt == "evaluator":
                    check(got["this_task"]["role"] == "evaluator", f"{what}: role {got['this_task']['role']}")
                if include_evaluator:
                    container = next(c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow")
                    out = dry_run(launcher, container["args"], {"TF_CONFIG": tf_config}, worker, what)
                    check(f"TF_CONFIG=" in out and f'"type":"{rt}"' in out.replace(" ", ""),
                          f"{what}: dry run does not hand the worker its TF_CONFIG:\n{out}")


def pod_env(container, pod_labels, namespace):
    env = {}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field == "metadata.namespace":
            env[e["name"]] = namespace
        elif field and field.startswith("metadata.labels['"):
            env[e["name"]] = pod_labels[field[len("metadata.labels['"):-2]]
        # secretKeyRef: the token, not needed to resolve the cluster
    return env


def check_indexed_job(launcher, docs, worker):
    namespace = "default"
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    jobs = [d for d in docs if d["kind"] == "Job"]
    trainer = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
    job_name = trainer["metadata"]["name"]
    pod = trainer["spec"]["template"]["spec"]
    service = services[pod["subdomain"]]
    n = trainer["spec"]["completions"]
    port = service["spec"]["ports"][0]["targetPort"]
    # What the headless Service publishes for the Job's pods (hostname <job>-<i>, subdomain).
    dns = [f"{job_name}-{i}.{service['metadata']['name']}.{namespace}.svc:{port}" for i in range(n)]
    for job in jobs:
        container = job["spec"]["template"]["spec"]["containers"][0]
        indexes = range(n) if job is trainer else [None]
        for i in indexes:
            labels = {"job-name": job["metadata"]["name"], "batch.kubernetes.io/job-name": job["metadata"]["name"]}
            env = pod_env(container, labels, namespace)
            if i is not None:
                env.update({"JOB_COMPLETION_INDEX": str(i), "HOSTNAME": f"{job_name}-{i}"})
            what = f"Job {job['metadata']['name']}" + (f" pod {i}" if i is not None else "")
            got = explain(launcher, ["--from-k8s-indexed-job"], env, what)
            if got is None:
                continue
            rows = [t for t in got["tasks"] if t["role"] != "evaluator"]
            check([t["address"] for t in rows] == dns, f"{what}: addresses {[t['address'] for t in rows]} != {dns}")
            check(got["coordination_service"]["address"] == dns[0], f"{what}: coordinator not at {dns[0]}")
            expected = f"worker:{i}" if i is not None else "evaluator:0"
            check(got["this_task"]["task"] == expected, f"{what}: this task {got['this_task']['task']} != {expected}")
            dry_run(launcher, container["args"], env, worker, what)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    launcher = sys.argv[1]
    directory = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[2] / "deploy/kubernetes"
    with tempfile.TemporaryDirectory() as tmp:
        # The real mirrored-worker beside the launcher: --dry-run runs it with
        # --check-flags (it starts nothing), so a manifest's worker flag that
        # does not exist fails here.
        worker = os.path.join(os.path.dirname(os.path.abspath(launcher)), "mirrored-worker")
        tfjobs = [d for d in yaml.safe_load_all((directory / "tfjob.yaml").read_text()) if d and d["kind"] == "TFJob"]
        check(len(tfjobs) == 1, "tfjob.yaml: expected one TFJob")
        for tfjob in tfjobs:
            check_tfjob(launcher, tfjob, worker)
        docs = [d for d in yaml.safe_load_all((directory / "indexed-job.yaml").read_text()) if d]
        check_indexed_job(launcher, docs, worker)
    for f in failures:
        print(f"FAIL: {f}")
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
