"""The deployment files: the Containerfile, compose.yaml and the Kubernetes manifests.

No container engine runs here (CI builds and runs the image with buildah in
deploy/image/ci.sh); these tests read the files: the manifests against the Kubernetes
schemas (kubernetes-validate, strict, on the oldest and the newest version it bundles), and
each file's promises (non-root, read-only root, probes, secrets only by reference, every
variable one Cosigner reads) against the code.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions

from bot.cli.commands import parser
from bot.policy.rules import load_policy
from bot.settings import SECRET_FIELDS, Settings

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
IMAGE_UID = 10001
VERSIONS = sorted({all_versions()[0], kubernetes_validate.latest_version()})


def variables() -> dict[str, str]:
    """Every environment variable Settings reads, by its field name."""
    found = {}
    for name, info in Settings.model_fields.items():
        choices = getattr(info.validation_alias, "choices", [])
        found[name] = next(c for c in choices if isinstance(c, str) and c.isupper())
    return found


def secret_variables() -> set[str]:
    """The variables that hold secrets: Settings' own list, and any named like one."""
    names = variables()
    return (
        {names[f] for f in SECRET_FIELDS}
        | {v for v in names.values() if re.search(r"SECRET|TOKEN|PASSWORD", v)}
        | {"POSTGRES_PASSWORD"}
    )


# --- the image ------------------------------------------------------------------------------


def test_the_dockerfile_is_the_containerfile() -> None:
    assert (ROOT / "Dockerfile").read_bytes() == (ROOT / "Containerfile").read_bytes()


def stages() -> list[list[str]]:
    """The Containerfile's instructions (continuations joined, comments dropped), by stage."""
    text = re.sub(r"\\\n", " ", (ROOT / "Containerfile").read_text())
    found: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            found.append([])
        found[-1].append(line)
    return found


def test_the_image_is_two_stages_on_debian_and_runs_serve_as_a_non_root_user() -> None:
    build, final = stages()
    assert [s[0].split()[1] for s in (build, final)] == ["debian:bookworm-slim"] * 2
    assert f"USER {IMAGE_UID}:{IMAGE_UID}" in final
    assert 'ENTRYPOINT ["cosigner"]' in final
    (cmd,) = [line for line in final if line.startswith("CMD ")]
    args = yaml.safe_load(cmd.removeprefix("CMD "))
    assert args[0] == "serve" and parser().parse_args(args).command == "serve"
    assert "VOLUME /data" in final and "WORKDIR /data" in final
    installs = " ".join(line for line in final if "apt-get install" in line)
    for tool in ("gcc", "build-essential", "python3-dev", "python3-pip", "python3-venv", "make"):
        assert tool not in installs, f"the final stage installs {tool}"
    # Only prebuilt wheels: nothing is compiled in the build stage either.
    assert any("--only-binary=:all:" in line for line in build)


def test_the_containerfile_carries_nothing_of_ci() -> None:
    text = (ROOT / "Containerfile").read_text()
    for ci_only in ("/usr/local/share/ca-certificates", "pip.conf", "PIP_CERT", "REQUESTS_CA_BUNDLE"):
        assert ci_only not in text


def test_the_build_context_holds_everything_the_containerfile_copies() -> None:
    kept = {
        line[1:].strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    copied = [
        line.split()[1]
        for stage in stages()
        for line in stage
        if line.startswith("COPY ") and "--from=" not in line
    ]
    assert copied
    for source in copied:
        assert any(source == k or source.startswith(k.rstrip("/") + "/") for k in kept), source
        assert (ROOT / source).exists(), source


# --- compose.yaml ---------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def test_compose_runs_two_replicas_on_postgres_after_a_migrate_step() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "migrate", "cosigner"}
    server, migrate = services["cosigner"], services["migrate"]
    assert server["deploy"]["replicas"] == 2
    assert server["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    assert migrate["command"] == ["migrate"] and migrate["restart"] == "no"
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert parser().parse_args(server["command"]).command == "serve"
    for service in (server, migrate):
        assert service["pull_policy"] == "build" and service["build"] == "."
        assert service["read_only"] is True and service["tmpfs"] == ["/tmp"]
        assert service["environment"]["COSIGNER_POLICY"] == "/etc/cosigner/policy.toml"
        assert "./policy.toml:/etc/cosigner/policy.toml:ro" in service["volumes"]


def test_compose_checks_health_on_readyz_and_pg_isready() -> None:
    services = compose()["services"]
    server = services["cosigner"]["healthcheck"]["test"]
    assert server[0] == "CMD" and "http://127.0.0.1:8000/readyz" in " ".join(server)
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]


def test_compose_keeps_every_secret_in_env_files_and_they_are_not_committed() -> None:
    secret = secret_variables()
    for name, service in compose()["services"].items():
        inline = set(service.get("environment", {}))
        assert not inline & secret, f"{name} sets {inline & secret} in compose.yaml"
        assert service["env_file"] in ("cosigner.env", "postgres.env"), name
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {"/cosigner.env", "/postgres.env"} <= set(ignored)


def env_example(name: str) -> dict[str, str]:
    """The variables an example env file sets or shows (commented out), with their values."""
    found = {}
    for line in (ROOT / "deploy" / "compose" / name).read_text().splitlines():
        match = re.match(r"#? ?([A-Z][A-Z0-9_]+)=(.*)$", line)
        if match:
            found[match[1]] = match[2]
    return found


def test_the_env_file_examples_name_only_variables_cosigner_reads() -> None:
    cosigner = env_example("cosigner.env.example")
    assert set(cosigner) <= set(variables().values()), set(cosigner) - set(variables().values())
    assert {"COSIGNER_SECRET", "COSIGNER_DATABASE_URL"} <= set(cosigner)
    assert cosigner["COSIGNER_SECRET"] == ""  # to fill in: no shared default secret
    assert set(env_example("postgres.env.example")) == {"POSTGRES_PASSWORD"}
    assert "@postgres/cosigner" in cosigner["COSIGNER_DATABASE_URL"]  # the compose service


# --- Kubernetes -----------------------------------------------------------------------------


def kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    return loaded


def manifests() -> list[dict[str, Any]]:
    """Every object of the folder's manifests, and the policy ConfigMap kustomize generates."""
    found = [
        doc
        for path in sorted(KUBE.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
    ]
    for generated in kustomization()["configMapGenerator"]:
        data = {Path(f).name: (KUBE / f).read_text() for f in generated["files"]}
        found.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": generated["name"]}, "data": data}
        )
    return found


def one(kind: str) -> dict[str, Any]:
    (found,) = [m for m in manifests() if m["kind"] == kind]
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(version: str) -> None:
    objects = manifests()
    assert {m["kind"] for m in objects} == {
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Job",
        "NetworkPolicy",
        "ConfigMap",
    }
    for manifest in objects:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # its text carries the whole schema
            where = "/".join(str(p) for p in exc.path)
            name = f"{manifest['kind']} {manifest['metadata']['name']}"
            raise AssertionError(f"{name} at {where or 'top'}: {exc.message}") from None


def test_the_kustomization_lists_every_manifest_and_generates_the_policy() -> None:
    k = kustomization()
    listed = set(k["resources"])
    assert listed == {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    (policy,) = k["configMapGenerator"]
    assert policy["name"] == "cosigner-policy" and policy["files"] == ["policy.toml"]
    assert [i["name"] for i in k["images"]] == ["cosigner"]


def pod_specs() -> list[dict[str, Any]]:
    return [m["spec"]["template"]["spec"] for m in manifests() if m["kind"] in ("Deployment", "Job")]


def test_every_container_runs_non_root_on_a_read_only_root_with_no_privileges() -> None:
    specs = pod_specs()
    assert len(specs) == 2
    for spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == IMAGE_UID
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"] + spec.get("initContainers", []):
            ctx = container["securityContext"]
            assert ctx["runAsNonRoot"] is True and ctx["readOnlyRootFilesystem"] is True
            assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}
            assert {"cpu", "memory"} <= set(container["resources"]["requests"])
            assert "memory" in container["resources"]["limits"]
            assert container["image"] == "cosigner"  # set by the kustomization's images
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/tmp", "/data"} <= mounts  # the only writable places
            assert parser().parse_args(container["args"])


def test_the_deployment_runs_two_replicas_with_probes_and_the_policy_read_only() -> None:
    deployment = one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][:1] == ["serve"]
    port = container["ports"][0]
    assert container["args"][-2:] == ["--port", str(port["containerPort"])]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    policy = {m["name"]: m for m in container["volumeMounts"]}["policy"]
    assert policy["readOnly"] is True
    env = {e["name"]: e for e in container["env"]}
    assert env["COSIGNER_POLICY"]["value"] == policy["mountPath"] + "/policy.toml"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["policy"]["configMap"]["name"] == kustomization()["configMapGenerator"][0]["name"]


def test_secrets_are_only_referenced_and_every_variable_is_one_cosigner_reads() -> None:
    assert "Secret" not in {m["kind"] for m in manifests()}
    known, secret = set(variables().values()), secret_variables()
    for spec in pod_specs():
        for container in spec["containers"]:
            for var in container["env"]:
                assert var["name"] in known, var["name"]
                if var["name"] in secret:
                    assert set(var) == {"name", "valueFrom"} and "secretKeyRef" in var["valueFrom"], var
            for source in container.get("envFrom", []):
                assert set(source) == {"secretRef"}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a matchLabels selector selects a pod with these labels."""
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_service_the_budget_and_the_network_policy_select_the_servers() -> None:
    labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    job_labels = one("Job")["spec"]["template"]["metadata"]["labels"]
    assert selects(one("Service")["spec"]["selector"], labels)
    budget = one("PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == 1 and selects(budget["selector"]["matchLabels"], labels)
    assert not selects(budget["selector"]["matchLabels"], job_labels)  # the Job's pod is no server
    network = one("NetworkPolicy")["spec"]
    assert selects(network["podSelector"]["matchLabels"], labels)
    assert selects(network["podSelector"]["matchLabels"], job_labels)


def test_egress_is_dns_the_database_and_https_to_public_addresses_only() -> None:
    network = one("NetworkPolicy")["spec"]
    assert set(network["policyTypes"]) == {"Ingress", "Egress"}
    ports = [sorted((p["protocol"], p["port"]) for p in rule["ports"]) for rule in network["egress"]]
    assert ports == [[("TCP", 53), ("UDP", 53)], [("TCP", 5432)], [("TCP", 443)]]
    dns, database, https = network["egress"]
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    assert "ipBlock" in database["to"][0]
    blocks = {b["ipBlock"]["cidr"]: set(b["ipBlock"]["except"]) for b in https["to"]}
    # The ranges Cosigner's own callback rules refuse (docs/operators.md#callback-targets).
    assert {
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "127.0.0.0/8",
        "100.64.0.0/10",
    } <= blocks["0.0.0.0/0"]
    assert {"fc00::/7", "fe80::/10", "::1/128"} <= blocks["::/0"]
    assert [p["port"] for p in network["ingress"][0]["ports"]] == [8000]


def test_the_policy_the_manifests_ship_is_valid() -> None:
    policy = tomllib.loads((KUBE / "policy.toml").read_text())
    assert policy["tools"]
    load_policy((KUBE / "policy.toml").read_text(), "deploy/kubernetes/policy.toml")
