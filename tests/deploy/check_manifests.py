#!/usr/bin/env python3
"""Checks deploy/kubernetes/*.yaml offline: every document parses, the
objects mirrored relies on hold together (Service <-> subdomain <-> Job,
replica counts <-> MIRRORED_K8S_NUM_WORKERS, ports, shared ReadWriteMany
volume, restart policies, GPU requests), and every built-in object plus every
pod template of the TFJob passes the Kubernetes OpenAPI schema (strict) with
kubernetes-validate (the oldest Kubernetes these templates support and the
newest known) when the interpreter has it: check_manifests.sh runs this with
the venv of tests/deploy/schema_venv.sh.

`kubectl apply --dry-run=client` is not used: it needs an API server for
discovery even in client mode, and none is reachable in CI.

  tests/deploy/check_manifests.sh deploy/kubernetes     # with the venv's kubernetes-validate
  python3 tests/deploy/check_manifests.py deploy/kubernetes
Exit status: 0 ok, 1 a check failed (each failure printed).
"""
import subprocess
import sys
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


def containers(pod_spec):
    return pod_spec.get("containers") or []


def env_of(container):
    return {e["name"]: e for e in container.get("env") or []}


def check_pod(where, pod_spec, claim_names, needs_gpu=True):
    check(containers(pod_spec), f"{where}: no container")
    # The image runs as uid 10001 (deploy/docker/Dockerfile): the run
    # directory's volume must be writable by it.
    check((pod_spec.get("securityContext") or {}).get("fsGroup") == 10001,
          f"{where}: the pod's securityContext.fsGroup must be 10001, the image's user")
    volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
    for c in containers(pod_spec):
        args = c.get("args") or []
        check(args[:1] == ["cluster"], f"{where}: container {c.get('name')} args must start with "
              f"'cluster' (the image's entry point is mirrored-launch), got {args[:1]}")
        check("--" in args, f"{where}: container {c.get('name')} passes no worker arguments after --")
        check("--run-dir" in args, f"{where}: container {c.get('name')} has no --run-dir")
        if "--run-dir" in args:
            run_dir = args[args.index("--run-dir") + 1]
            mounts = [m for m in c.get("volumeMounts") or [] if run_dir.startswith(m["mountPath"].rstrip("/") + "/")]
            if check(mounts, f"{where}: --run-dir {run_dir} is on no mounted volume"):
                vol = volumes.get(mounts[0]["name"], {})
                claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
                check(claim in claim_names, f"{where}: run directory volume {mounts[0]['name']} is not the "
                      f"ReadWriteMany claim of this file ({sorted(claim_names)}), got {claim}")
        token = env_of(c).get("MIRRORED_JOB_TOKEN", {})
        check("secretKeyRef" in (token.get("valueFrom") or {}),
              f"{where}: MIRRORED_JOB_TOKEN must come from a Secret (secretKeyRef)")
        if needs_gpu:
            limits = (c.get("resources") or {}).get("limits") or {}
            check(int(limits.get("nvidia.com/gpu", 0)) >= 1, f"{where}: no nvidia.com/gpu limit")


def rwx_claims(docs):
    claims = set()
    for d in docs:
        if d.get("kind") == "PersistentVolumeClaim":
            if check("ReadWriteMany" in d["spec"].get("accessModes", []),
                     f"PVC {d['metadata']['name']} must be ReadWriteMany (every task shares the run directory)"):
                claims.add(d["metadata"]["name"])
    return claims


def check_tfjob(doc, claims):
    name = doc["metadata"]["name"]
    check(doc.get("apiVersion") == "kubeflow.org/v1", f"TFJob {name}: apiVersion must be kubeflow.org/v1")
    specs = doc["spec"].get("tfReplicaSpecs") or {}
    check(set(specs) <= {"Chief", "Worker", "Evaluator"},
          f"TFJob {name}: replica types {sorted(specs)}: mirrored runs Chief, Worker and Evaluator only (no PS)")
    check("Chief" in specs or "Worker" in specs, f"TFJob {name}: no Chief or Worker")
    check(specs.get("Chief", {}).get("replicas", 1) == 1, f"TFJob {name}: at most one Chief")
    check(specs.get("Evaluator", {}).get("replicas", 1) == 1, f"TFJob {name}: at most one Evaluator")
    for rtype, spec in specs.items():
        where = f"TFJob {name} {rtype}"
        check(spec.get("restartPolicy") == "ExitCode", f"{where}: restartPolicy must be ExitCode")
        pod = spec["template"]["spec"]
        names = [c.get("name") for c in containers(pod)]
        check("tensorflow" in names, f"{where}: the operator writes TF_CONFIG into the container named "
              f"'tensorflow' only; containers are {names}")
        for c in containers(pod):
            args = c.get("args") or []
            check(not {"--from-slurm", "--from-k8s-indexed-job", "--tf-config"} & set(args),
                  f"{where}: TF_CONFIG comes from the operator; drop the other cluster sources from args")
        check_pod(where, pod, claims)


def check_indexed_jobs(docs, claims):
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    jobs = [d for d in docs if d.get("kind") == "Job"]
    indexed = [j for j in jobs if j["spec"].get("completionMode") == "Indexed"]
    check(len(indexed) == 1, f"expected one Indexed Job, found {len(indexed)}")
    training_names = {j["metadata"]["name"] for j in indexed}
    for job in jobs:
        name = job["metadata"]["name"]
        spec = job["spec"]
        pod = spec["template"]["spec"]
        where = f"Job {name}"
        check_pod(where, pod, claims)
        check(pod.get("restartPolicy") == "Never" or "podFailurePolicy" not in spec,
              f"{where}: podFailurePolicy needs restartPolicy Never")
        c = containers(pod)[0]
        env = env_of(c)
        check("--from-k8s-indexed-job" in (c.get("args") or []), f"{where}: args lack --from-k8s-indexed-job")
        role = (env.get("MIRRORED_K8S_ROLE") or {}).get("value", "worker")
        num = (env.get("MIRRORED_K8S_NUM_WORKERS") or {}).get("value")
        service = (env.get("MIRRORED_K8S_SERVICE") or {}).get("value")
        check(service in services, f"{where}: MIRRORED_K8S_SERVICE {service!r} is no Service of this file")
        if role == "evaluator":
            job_name = (env.get("MIRRORED_K8S_JOB_NAME") or {}).get("value")
            check(job_name in training_names, f"{where}: the evaluator's MIRRORED_K8S_JOB_NAME {job_name!r} "
                  f"must name the training Job ({sorted(training_names)})")
            trainer = next((j for j in indexed if j["metadata"]["name"] == job_name), None)
            if trainer is not None:
                check(num == str(trainer["spec"]["completions"]),
                      f"{where}: MIRRORED_K8S_NUM_WORKERS {num} is not the training Job's completions "
                      f"{trainer['spec']['completions']}")
            continue
        check(spec.get("completionMode") == "Indexed", f"{where}: a worker Job must be Indexed")
        check(num == str(spec.get("completions")) == str(spec.get("parallelism")),
              f"{where}: completions {spec.get('completions')}, parallelism {spec.get('parallelism')} and "
              f"MIRRORED_K8S_NUM_WORKERS {num} must agree (every worker runs at once)")
        check(pod.get("subdomain") == service,
              f"{where}: the pods' subdomain {pod.get('subdomain')!r} must be MIRRORED_K8S_SERVICE {service!r}")
        svc = services.get(service)
        if svc is not None:
            check(svc["spec"].get("clusterIP") == "None", f"Service {service} must be headless (clusterIP: None)")
            check(svc["spec"].get("selector") == {"job-name": name},
                  f"Service {service}: selector must be job-name: {name}, got {svc['spec'].get('selector')}")
            port = (env.get("MIRRORED_K8S_PORT") or {}).get("value", "2222")
            check(int(port) in [p.get("targetPort", p["port"]) for p in svc["spec"].get("ports", [])],
                  f"Service {service} does not expose MIRRORED_K8S_PORT {port}")
            check(int(port) in [p["containerPort"] for p in c.get("ports") or []],
                  f"{where}: container does not declare port {port}")
        job_name_ref = ((env.get("MIRRORED_K8S_JOB_NAME") or {}).get("valueFrom") or {}).get("fieldRef", {})
        check(job_name_ref.get("fieldPath") == "metadata.labels['job-name']" or
              (env.get("MIRRORED_K8S_JOB_NAME") or {}).get("value") == name,
              f"{where}: MIRRORED_K8S_JOB_NAME must be the Job's name (or the pod label job-name)")


# The oldest Kubernetes whose Job schema takes these podFailurePolicy rules
# (1.26-1.28 require onPodConditions in every rule), and the newest known.
OLDEST_SCHEMA = "1.29.0"


def schema_validator():
    """kubernetes_validate, or None when this interpreter lacks it
    (check_manifests.sh runs this file with tests/deploy/schema_venv.sh's)."""
    try:
        import kubernetes_validate
    except ImportError:
        return None
    return kubernetes_validate


def schema_check(path, docs):
    kv = schema_validator()
    if kv is None:
        print(f"note: kubernetes-validate unavailable to {sys.executable}: {path.name} had structural checks only")
        return
    versions = [OLDEST_SCHEMA, kv.latest_version()]
    for d in docs:
        targets = [(f"{d['kind']} {d['metadata']['name']}", d)]
        if d["kind"] == "TFJob":  # a CRD: no schema offline; its pod templates are core objects
            targets = [(f"TFJob {d['metadata']['name']} {rtype} template",
                        {"apiVersion": "v1", "kind": "PodTemplate",
                         "metadata": {"name": f"{d['metadata']['name']}-{rtype.lower()}"},
                         "template": spec["template"]})
                       for rtype, spec in d["spec"]["tfReplicaSpecs"].items()]
        for what, obj in targets:
            for version in versions:
                try:
                    kv.validate(obj, version, strict=True)
                except kv.ValidationError as e:
                    failures.append(f"{path.name}: {what}: Kubernetes {version} schema: {e.message} at {list(e.path)}")
            print(f"ok: {path.name}: {what} checked against the Kubernetes {' and '.join(versions)} schemas (strict)")


def main():
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "deploy/kubernetes"
    files = sorted(directory.glob("*.yaml"))
    check(len(files) >= 2, f"{directory}: expected tfjob.yaml and indexed-job.yaml, found {[f.name for f in files]}")
    for path in files:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            failures.append(f"{path}: does not parse: {e}")
            continue
        before = len(failures)
        for d in docs:
            check(all(k in d for k in ("apiVersion", "kind", "metadata")) and "name" in d.get("metadata", {}),
                  f"{path.name}: a document lacks apiVersion, kind or metadata.name")
        claims = rwx_claims(docs)
        kinds = {d.get("kind") for d in docs}
        if "TFJob" in kinds:
            for d in docs:
                if d.get("kind") == "TFJob":
                    check_tfjob(d, claims)
        elif "Job" in kinds:
            check_indexed_jobs(docs, claims)
        else:
            failures.append(f"{path.name}: neither a TFJob nor a Job")
        if len(failures) == before:
            schema_check(path, docs)
        print(f"{'FAIL' if len(failures) > before else 'ok'}: {path.name}: {len(docs)} objects")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
