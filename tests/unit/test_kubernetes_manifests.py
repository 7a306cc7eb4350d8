"""deploy/kubernetes: the kustomize base, the example overlay and the TLS component, rendered with
`kubectl kustomize` and checked against the Kubernetes API schemas of one fixed version (strict:
an unknown field fails), then against what our processes need:

- the control plane is a StatefulSet of three whose replicas advertise their own DNS names under
  the headless Service, probed on the gRPC health services the server serves (`""` for readiness,
  `sluiceway.liveness` for liveness), with a PodDisruptionBudget over its pods, and a drain time
  and grace period that fit the probes and the server's own shutdown;
- each process's command line, environment and mounted files are given to the code that reads them
  (the server's and the executor's argument parsers and configuration loaders), so a flag, a
  `SLUICEWAY_*` variable, a worker key or a file path that the code would refuse fails here;
- every container asks for resources and runs as the image's non-root user under the `restricted`
  Pod Security Standard; every ConfigMap and Secret a workload uses is in the render or in
  deploy/kubernetes/operator-secrets.yaml (and that list names nothing else); Service,
  NetworkPolicy and Prometheus ports are container ports the processes really listen on; the image
  tag comes from the overlay, and the pods fit deploy/image/Dockerfile (its user, its commands).

Without kubectl only the base's YAML files are checked against the schemas, as they are.
components/tls puts exec probes in place of the gRPC probes: they run the image's health check
(sluiceway-healthcheck, deploy/image/healthcheck.py, whose own tests are in test_container_image.py).
Here its rendered probe commands run that script with a replica pod's arguments, variables and
files, against a real gRPC health server over mutual TLS."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from deploy.image import healthcheck
from sluiceway.common.metrics_endpoint import parse_metrics_listener
from sluiceway.common.properties import parse_properties
from sluiceway.common.targets import parse_targets
from sluiceway_executor import main as executor_main
from sluiceway_server import main as server_main
from sluiceway_server.config import WorkerConfig
from sluiceway_server.dev_certificates import make_dev_certificates
from sluiceway_server.server import ControlPlane

Doc = dict[str, Any]

ROOT: Final = Path(__file__).resolve().parents[2]
KUBERNETES: Final = ROOT / "deploy" / "kubernetes"
BASE: Final = KUBERNETES / "base"
OVERLAY: Final = KUBERNETES / "overlays" / "example"
TLS_COMPONENT: Final = KUBERNETES / "components" / "tls"
OPERATOR_SECRETS: Final = KUBERNETES / "operator-secrets.yaml"
# The image's Spark Connect launcher and health check, and the commands the image installs them as.
SPARK_LAUNCHER: Final = ROOT / "deploy" / "image" / "spark-connect.sh"
SPARK_LAUNCHER_COMMAND: Final = "sluiceway-spark-connect"
HEALTHCHECK_SCRIPT: Final = ROOT / "deploy" / "image" / "healthcheck.py"
HEALTHCHECK_COMMAND: Final = "sluiceway-healthcheck"
DOCKERFILE: Final = ROOT / "deploy" / "image" / "Dockerfile"

# The API version the manifests are checked against (the kubectl of the test machines is 1.32).
KUBERNETES_VERSION: Final = "1.32.0"
KUBECTL: Final = shutil.which("kubectl")
NO_KUBECTL: Final = (
    "kubectl is not installed: the kustomize renders are not checked (the base's files are, as they are)"
)
# The renders: the base alone, the example overlay, and the overlay with components/tls.
BASE_RENDER: Final = "base"
EXAMPLE: Final = "example"
EXAMPLE_TLS: Final = "example+tls"
RENDERS: Final = (BASE_RENDER, EXAMPLE, EXAMPLE_TLS)

CONTROL_PLANE: Final = "sluiceway-server"
EXECUTOR: Final = "sluiceway-executor"
SPARK_CONNECT: Final = "spark-connect"
IMAGE: Final = "sluiceway"
IMAGE_UID: Final = 10001  # the user the image runs as
GRPC_PORT: Final = 8083
LIVENESS_SERVICE: Final = "sluiceway.liveness"
WORKLOAD_KINDS: Final = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"})
# Kubernetes' `$(NAME)` references in command, args and env values; `$$(` is an escaped one.
VARIABLE: Final = re.compile(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# Values the downward API gives, for the pod the checks pretend to be.
POD_IP: Final = "10.1.2.3"
# Worker keys that name files the control plane reads.
FILE_KEYS: Final = (
    "auth.tokens.file",
    "tls.certificate.file",
    "tls.key.file",
    "tls.ca.file",
    "tls.client.ca.file",
)
FAKE_PEM: Final = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
FAKE_TOKEN: Final = "fake-token-for-the-manifest-tests-0123456789"


# --- rendering and looking things up -----------------------------------------------------------


def kustomize(directory: Path) -> list[Doc]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Doc]]:
    if KUBECTL is None:
        pytest.skip(NO_KUBECTL)
    # The example overlay with the TLS component added, as the component's comment says: a copy of
    # it elsewhere, its paths to the base and the component made relative to the copy.
    with_tls = tmp_path_factory.mktemp("with-tls")
    for path in OVERLAY.iterdir():
        shutil.copy(path, with_tls / path.name)
    kustomization = overlay_kustomization()
    kustomization["resources"] = [
        os.path.relpath((OVERLAY / entry).resolve(), with_tls) if entry.startswith("..") else entry
        for entry in kustomization["resources"]
    ]
    kustomization["components"] = [os.path.relpath(TLS_COMPONENT, with_tls)]
    (with_tls / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return {BASE_RENDER: kustomize(BASE), EXAMPLE: kustomize(OVERLAY), EXAMPLE_TLS: kustomize(with_tls)}


def find(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [doc for doc in docs if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def workloads(docs: list[Doc]) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] in WORKLOAD_KINDS]


def pod_template(workload: Doc) -> Doc:
    template: Doc = workload["spec"]["template"]
    return template


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = pod_template(workload)["spec"]
    return spec


def containers(workload: Doc) -> list[Doc]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def container(workload: Doc, name: str) -> Doc:
    found = [c for c in containers(workload) if c["name"] == name]
    assert len(found) == 1, f"{workload['metadata']['name']}: expected one container {name}"
    return found[0]


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def selected_workloads(docs: list[Doc], selector: Mapping[str, str]) -> list[Doc]:
    return [w for w in workloads(docs) if selects(selector, pod_template(w)["metadata"].get("labels", {}))]


def namespace_of(doc: Doc) -> str:
    namespace: str = doc["metadata"].get("namespace", "default")
    return namespace


def container_ports(workload: Doc) -> dict[str, int]:
    """Every container port of the pod by name (unnamed ones by their number)."""
    ports: dict[str, int] = {}
    for each in containers(workload):
        for port in each.get("ports", []):
            ports[port.get("name", str(port["containerPort"]))] = port["containerPort"]
    return ports


def config_map_data(docs: list[Doc], name: str) -> dict[str, str]:
    data: dict[str, str] = find(docs, "ConfigMap", name).get("data", {})
    return data


def operator_secrets() -> dict[str, frozenset[str]]:
    """deploy/kubernetes/operator-secrets.yaml: the Secrets the operator creates, with their keys."""
    listed = yaml.safe_load(OPERATOR_SECRETS.read_text())
    return {name: frozenset(entry["keys"]) for name, entry in listed.items()}


def quantity(text: str | int) -> float:
    """A Kubernetes quantity (`250m`, `512Mi`, `2Gi`, `1`) as a number."""
    suffixes = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
    value = str(text)
    for suffix, factor in suffixes.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


# --- what a container sees: its variables and its mounted files ---------------------------------


def _references(workload: Doc, volume_kind: str, name_field: str, env_ref: str) -> set[tuple[str, str]]:
    """(object, key) pairs the pod reads from one kind of object: its volumes of ``volume_kind``
    (the object named in ``name_field``) and its variables' ``env_ref`` references."""
    used: set[tuple[str, str]] = set()
    for volume in pod_spec(workload).get("volumes", []):
        if volume_kind in volume:
            items = volume[volume_kind].get("items")
            assert items, f"volume {volume['name']}: list the keys it mounts (items)"
            used |= {(volume[volume_kind][name_field], item["key"]) for item in items}
    for each in containers(workload):
        for variable in each.get("env", []):
            ref = variable.get("valueFrom", {}).get(env_ref)
            if ref is not None:
                used.add((ref["name"], ref["key"]))
    return used


def secret_references(workload: Doc) -> set[tuple[str, str]]:
    """(Secret, key) pairs the pod reads, from volumes and variables."""
    for each in containers(workload):
        assert "envFrom" not in each, "envFrom hides which keys become variables: name them"
    return _references(workload, "secret", "secretName", "secretKeyRef")


def config_map_references(workload: Doc) -> set[tuple[str, str]]:
    """(ConfigMap, key) pairs the pod reads, from volumes and variables."""
    return _references(workload, "configMap", "name", "configMapKeyRef")


def expand(text: str, known: Mapping[str, str]) -> str:
    """Kubernetes' expansion of `$(NAME)`: known names are replaced, others left as they are."""
    return VARIABLE.sub(lambda match: known.get(match.group(1), match.group(0)), text)


def environment(docs: list[Doc], workload: Doc, each: Doc) -> dict[str, str]:
    """The container's variables as its process sees them in the first pod of the workload."""
    pod_fields = {
        "metadata.name": f"{workload['metadata']['name']}-0",
        "metadata.namespace": namespace_of(workload),
        "status.podIP": POD_IP,
    }
    env: dict[str, str] = {}
    for variable in each.get("env", []):
        name = variable["name"]
        source = variable.get("valueFrom", {})
        if "value" in variable:
            env[name] = expand(variable["value"], env)
        elif "fieldRef" in source:
            env[name] = pod_fields[source["fieldRef"]["fieldPath"]]
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[name] = config_map_data(docs, ref["name"])[ref["key"]]
        elif "secretKeyRef" in source:
            env[name] = FAKE_TOKEN
        else:
            raise AssertionError(f"{name}: a variable source the checks do not know: {variable}")
    return env


def fake_secret_content(key: str) -> str:
    return FAKE_PEM if key.endswith((".crt", ".pem", ".key")) else FAKE_TOKEN + "\n"


def mounted_files(docs: list[Doc], workload: Doc, each: Doc) -> dict[str, str]:
    """Path → content of every file the container's volumes give it (Secrets get stand-ins)."""
    volumes = {volume["name"]: volume for volume in pod_spec(workload).get("volumes", [])}
    files: dict[str, str] = {}
    for mount in each.get("volumeMounts", []):
        assert "subPath" not in mount, f"{mount['name']}: a subPath mount never sees updates"
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            data = config_map_data(docs, volume["configMap"]["name"])
            for item in volume["configMap"]["items"]:
                assert item["key"] in data, f"ConfigMap {volume['configMap']['name']} has no {item['key']}"
                files[f"{mount['mountPath']}/{item['path']}"] = data[item["key"]]
        elif "secret" in volume:
            for item in volume["secret"]["items"]:
                files[f"{mount['mountPath']}/{item['path']}"] = fake_secret_content(item["key"])
        else:
            assert "emptyDir" in volume, f"volume {mount['name']}: a kind the checks do not know"
    return files


@dataclass
class ContainerView:
    """A container's files written under `root`, its variables and arguments with their paths moved
    there, so that the project's own parsers can read them."""

    root: Path
    env: dict[str, str]
    argv: list[str]
    files: dict[str, str]

    def rooted(self, text: str) -> str:
        for path in sorted({str(Path(file).parent) for file in self.files}, key=len, reverse=True):
            text = re.sub(rf"(?<![\w/]){re.escape(path)}/", f"{self.root}{path}/", text)
        return text

    def unrooted(self, text: str) -> str:
        return text.replace(str(self.root), "")


def container_view(docs: list[Doc], workload: Doc, each: Doc, root: Path) -> ContainerView:
    files = mounted_files(docs, workload, each)
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    env = environment(docs, workload, each)
    argv = [expand(arg, env) for arg in each.get("args", [])]
    view = ContainerView(root, {}, [], files)
    view.env = {name: view.rooted(value) for name, value in env.items()}
    view.argv = [view.rooted(arg) for arg in argv]
    return view


@contextlib.contextmanager
def process_environment(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str]) -> Iterator[None]:
    """This process's SLUICEWAY_* variables replaced by the container's, for the loaders that read
    os.environ."""
    with monkeypatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("SLUICEWAY_"):
                patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        yield


def load_control_plane(
    docs: list[Doc], root: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[WorkerConfig, ContainerView]:
    """The WorkerConfig `sluiceway server` builds in the control plane's first pod."""
    workload = find(docs, "StatefulSet", CONTROL_PLANE)
    server = container(workload, "server")
    assert server["command"] == ["sluiceway"]
    view = container_view(docs, workload, server, root)
    assert view.argv[0] == "server"
    with process_environment(monkeypatch, view.env):
        try:
            config = server_main.load_config(server_main.parse_args(view.argv[1:]))
        except SystemExit:
            pytest.fail(f"sluiceway server refuses its arguments {view.argv[1:]}")
    return config, view


def load_executor(docs: list[Doc], root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ContainerView]:
    """The settings `sluiceway executor` parses in an executor pod."""
    workload = find(docs, "Deployment", EXECUTOR)
    each = container(workload, "executor")
    assert each["command"] == ["sluiceway"]
    view = container_view(docs, workload, each, root)
    assert view.argv[0] == "executor"
    with process_environment(monkeypatch, view.env):
        try:
            args = executor_main.parse_args(view.argv[1:])
        except SystemExit:
            pytest.fail(f"sluiceway executor refuses its arguments {view.argv[1:]}")
    return args, view


def service_port(docs: list[Doc], target: str) -> tuple[Doc, Doc]:
    """The Service and Service port a `host:port` target in the same namespace names."""
    host, _, port = target.rpartition(":")
    service = find(docs, "Service", host)
    ports = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    assert ports, f"Service {host} has no port {port}"
    return service, ports[0]


def overlay_kustomization() -> Doc:
    loaded: Doc = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    return loaded


# --- the schemas ---------------------------------------------------------------------------------


def schema_errors(docs: list[Doc]) -> list[str]:
    errors = []
    for doc in docs:
        label = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(part) for part in exc.path)
            errors.append(f"{label}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{label}: {exc.message}")
    return errors


def test_the_base_files_validate_as_they_are() -> None:
    """Every document of every YAML file in base/ (its kustomization aside), without kubectl."""
    files = sorted(path for path in BASE.glob("*.yaml") if path.name != "kustomization.yaml")
    assert {path.name for path in files} >= {"control-plane.yaml", "executor.yaml", "spark-connect.yaml"}
    docs = [doc for path in files for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert {doc["kind"] for doc in docs} >= {"StatefulSet", "Deployment", "Service", "PodDisruptionBudget"}
    assert schema_errors(docs) == []


@pytest.mark.parametrize("name", RENDERS)
def test_every_rendered_document_validates(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    kinds = {doc["kind"] for doc in docs}
    assert kinds >= {"StatefulSet", "Deployment", "Service", "ConfigMap", "PodDisruptionBudget"}
    assert schema_errors(docs) == []


def test_the_schema_check_refuses_unknown_fields_and_wrong_types(renders: dict[str, list[Doc]]) -> None:
    """The check above would catch a misspelt field or a port given by name where a number goes."""
    statefulset = find(renders[BASE_RENDER], "StatefulSet", CONTROL_PLANE)
    misspelt = yaml.safe_load(yaml.safe_dump(statefulset))
    container(misspelt, "server")["livenesProbe"] = container(misspelt, "server").pop("livenessProbe")
    named_port = yaml.safe_load(yaml.safe_dump(statefulset))
    container(named_port, "server")["readinessProbe"]["grpc"]["port"] = "grpc"
    errors = schema_errors([misspelt, named_port])
    assert len(errors) == 2
    assert "livenesProbe" in errors[0]
    assert "'grpc' is not of type 'integer'" in errors[1]


# --- the control plane ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_three_replicas_advertise_their_own_dns_names(
    renders: dict[str, list[Doc]], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = renders[name]
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    assert statefulset["spec"]["replicas"] == 3
    headless = find(docs, "Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    # A leader that is not ready for a moment must stay reachable under its name.
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert selected_workloads(docs, headless["spec"]["selector"]) == [statefulset]

    config, _ = load_control_plane(docs, tmp_path, monkeypatch)
    namespace = namespace_of(statefulset)
    assert namespace == ("default" if name == BASE_RENDER else overlay_kustomization()["namespace"])
    expected = f"{CONTROL_PLANE}-0.{headless['metadata']['name']}.{namespace}.svc:{GRPC_PORT}"
    assert config.advertised_address(GRPC_PORT) == expected
    # What it advertises is the port it listens on, on every interface of the pod.
    assert config.listen_address() == f"0.0.0.0:{GRPC_PORT}"
    assert container_ports(statefulset)["grpc"] == GRPC_PORT
    assert [p["port"] for p in headless["spec"]["ports"]] == [GRPC_PORT]


@pytest.mark.parametrize("name", [BASE_RENDER, EXAMPLE])
def test_the_probes_ask_the_grpc_health_services(renders: dict[str, list[Doc]], name: str) -> None:
    server = container(find(renders[name], "StatefulSet", CONTROL_PLANE), "server")
    assert server["readinessProbe"]["grpc"] == {"port": GRPC_PORT}  # service "": readiness
    assert server["livenessProbe"]["grpc"] == {"port": GRPC_PORT, "service": LIVENESS_SERVICE}
    assert server["startupProbe"]["grpc"] == {"port": GRPC_PORT, "service": LIVENESS_SERVICE}


# The health service each probe of the control plane asks ("" is readiness).
PROBE_SERVICES: Final = {
    "readinessProbe": "",
    "livenessProbe": LIVENESS_SERVICE,
    "startupProbe": LIVENESS_SERVICE,
}
TLS_FILES: Final = frozenset(
    {"/etc/sluiceway/tls/tls.crt", "/etc/sluiceway/tls/tls.key", "/etc/sluiceway/tls/ca.crt"}
)


def test_with_tls_the_probes_ask_the_same_services_over_tls(renders: dict[str, list[Doc]]) -> None:
    """Exec probes of the image's health check, with --service for the liveness service, timed as
    the base's gRPC probes. The component brings no script of its own: it mounts nothing for the
    probes and makes no ConfigMap."""
    docs = renders[EXAMPLE_TLS]
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    server = container(statefulset, "server")
    base_statefulset = find(renders[EXAMPLE], "StatefulSet", CONTROL_PLANE)
    base_server = container(base_statefulset, "server")
    for probe, service in PROBE_SERVICES.items():
        assert set(server[probe]) & {"grpc", "httpGet", "tcpSocket"} == set()
        command = server[probe]["exec"]["command"]
        expected = [HEALTHCHECK_COMMAND] if service == "" else [HEALTHCHECK_COMMAND, f"--service={service}"]
        assert command == expected
        arguments = healthcheck.parser().parse_args(command[1:])
        assert (arguments.service or "") == service
        timing = {key: value for key, value in server[probe].items() if key != "exec"}
        assert timing == {key: value for key, value in base_server[probe].items() if key != "grpc"}
    base_files = mounted_files(renders[EXAMPLE], base_statefulset, base_server)
    added = mounted_files(docs, statefulset, server).keys() - base_files.keys()
    assert added == TLS_FILES
    config_maps = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "ConfigMap"}
    assert config_maps == {doc["metadata"]["name"] for doc in renders[EXAMPLE] if doc["kind"] == "ConfigMap"}
    assert not list(TLS_COMPONENT.glob("*.py"))


@pytest.mark.parametrize("name", RENDERS)
def test_drain_and_grace_fit_the_probes_and_the_shutdown(
    renders: dict[str, list[Doc]], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SIGTERM a replica reports not ready for shutdown.drain.ms while still answering: longer
    than the readiness probe takes to see it. Then the gRPC server's own grace (ControlPlane.stop)
    and the rest of the shutdown must end before the kubelet's SIGKILL."""
    docs = renders[name]
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    server = container(statefulset, "server")
    config, _ = load_control_plane(docs, tmp_path, monkeypatch)
    drain_ms = config.get_int("shutdown.drain.ms")
    readiness = server["readinessProbe"]
    noticed_ms = (
        readiness["periodSeconds"] * readiness["failureThreshold"] + readiness["timeoutSeconds"]
    ) * 1000
    assert drain_ms > noticed_ms
    grace_s = inspect.signature(ControlPlane.stop).parameters["grace"].default
    assert isinstance(grace_s, float)
    termination_ms = pod_spec(statefulset)["terminationGracePeriodSeconds"] * 1000
    assert termination_ms >= drain_ms + grace_s * 1000 + 30_000  # 30 s for the group, plugins, stores
    # The startup probe waits for as long as the replica may wait for Kafka at start.
    startup = server["startupProbe"]
    startup_window_ms = startup["periodSeconds"] * startup["failureThreshold"] * 1000
    assert startup_window_ms > config.get_int("startup.timeout.ms")
    # Liveness never restarts a replica before a slow answer could have come.
    liveness = server["livenessProbe"]
    assert liveness["timeoutSeconds"] >= readiness["timeoutSeconds"]
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 30


@pytest.mark.parametrize("name", RENDERS)
def test_the_disruption_budget_keeps_two_replicas(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    budget = find(docs, "PodDisruptionBudget", CONTROL_PLANE)
    assert budget["spec"]["minAvailable"] == 2
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    assert selected_workloads(docs, budget["spec"]["selector"]["matchLabels"]) == [statefulset]
    assert budget["spec"]["minAvailable"] < statefulset["spec"]["replicas"]  # a drain can go on


@pytest.mark.parametrize("name", RENDERS)
def test_the_control_plane_reads_what_its_pod_gives_it(
    renders: dict[str, list[Doc]], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker config the server builds from its file, variables and flags passes the server's
    own checks; the files it names are mounted; the ports it listens on are the pod's."""
    docs = renders[name]
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    config, view = load_control_plane(docs, tmp_path, monkeypatch)
    worker_config_map = config_map_data(docs, sluiceway_worker_config(docs))
    assert config.get("bootstrap.servers") == worker_config_map["bootstrap.servers"]
    assert config.get("replica.auth.token") == FAKE_TOKEN  # from the Secret
    for key in FILE_KEYS:
        if config.get(key):
            assert view.unrooted(config.get(key)) in view.files, f"{key}={config.get(key)} is not mounted"
    assert config.get("auth.tokens.file"), "a listener off loopback needs the tokens file"
    ports = container_ports(statefulset)
    (rest,) = config.rest_listeners()
    assert rest.port == ports["rest"]
    metrics = parse_metrics_listener(config.get("metrics.listeners"))
    assert metrics is not None
    assert metrics[1] == ports["metrics"]
    if name == EXAMPLE_TLS:
        assert rest.scheme == "https"
        for key in ("tls.certificate.file", "tls.key.file", "tls.ca.file"):
            assert config.get(key), f"{key} is set with components/tls"
    else:
        assert rest.scheme == "http"
        assert not config.get("tls.certificate.file")


def sluiceway_worker_config(docs: list[Doc]) -> str:
    """The (hashed) name of the control plane's worker ConfigMap in this render."""
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    (name,) = {ref for ref, key in config_map_references(statefulset) if key == "worker.properties"}
    return name


# --- executors and Spark Connect -----------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_executors_reach_the_control_plane_and_spark_connect(
    renders: dict[str, list[Doc]], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = renders[name]
    args, view = load_executor(docs, tmp_path, monkeypatch)
    # --server: the client Service, on the replicas' gRPC port.
    (target,) = parse_targets(args.server)
    service, port = service_port(docs, target)
    assert service["spec"].get("clusterIP") != "None"
    assert selected_workloads(docs, service["spec"]["selector"]) == [find(docs, "StatefulSet", CONTROL_PLANE)]
    assert port["targetPort"] == "grpc"
    assert port["port"] == GRPC_PORT
    # --spark-remote: the Spark Connect Service, on the port the server binds.
    assert args.spark_remote.startswith("sc://")
    service, port = service_port(docs, args.spark_remote.removeprefix("sc://"))
    (spark,) = selected_workloads(docs, service["spec"]["selector"])
    assert spark["metadata"]["name"] == SPARK_CONNECT
    spark_env = environment(docs, spark, container(spark, SPARK_CONNECT))
    assert container_ports(spark)[port["targetPort"]] == int(spark_env["SPARK_CONNECT_PORT"])
    # It authenticates, and with components/tls trusts the replicas' CA.
    assert args.security.token == FAKE_TOKEN
    if name == EXAMPLE_TLS:
        assert args.security.uses_tls
        assert view.unrooted(args.security.ca_file) in view.files
        assert not any(path.endswith(".key") for path in view.files), "executors never get the key"
    else:
        assert not args.security.uses_tls


@pytest.mark.parametrize("name", RENDERS)
def test_executor_probe_is_its_metrics_endpoint(
    renders: dict[str, list[Doc]], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executors serve no gRPC: liveness asks /metrics, which they serve only with metrics.listeners."""
    docs = renders[name]
    executor = find(docs, "Deployment", EXECUTOR)
    args, _ = load_executor(docs, tmp_path, monkeypatch)
    assert args.metrics_listener is not None
    host, port = args.metrics_listener
    assert host == "0.0.0.0"
    probe = container(executor, "executor")["livenessProbe"]["httpGet"]
    assert probe["path"] == "/metrics"
    assert container_ports(executor)[probe["port"]] == port
    assert "readinessProbe" not in container(executor, "executor")


def spark_defaults(docs: list[Doc]) -> dict[str, str]:
    spark = find(docs, "Deployment", SPARK_CONNECT)
    (name,) = {ref for ref, key in config_map_references(spark) if key == "spark-defaults.conf"}
    return parse_properties(config_map_data(docs, name)["spark-defaults.conf"])


@pytest.mark.parametrize("name", RENDERS)
def test_spark_connect_starts_from_its_config_map(renders: dict[str, list[Doc]], name: str) -> None:
    """The image's launcher (deploy/image/spark-connect.sh) with the pod's settings: the variables
    it reads, and spark-defaults.conf from the ConfigMap for the rest."""
    docs = renders[name]
    spark = find(docs, "Deployment", SPARK_CONNECT)
    each = container(spark, SPARK_CONNECT)
    assert each["command"] == [SPARK_LAUNCHER_COMMAND]
    files = mounted_files(docs, spark, each)
    (properties_file,) = [
        each["args"][index + 1] for index, arg in enumerate(each["args"]) if arg == "--properties-file"
    ]
    assert properties_file in files
    env = environment(docs, spark, each)
    settings = {name for name in env if name.startswith("SPARK_CONNECT_")}
    launcher = SPARK_LAUNCHER.read_text()
    assert settings == {"SPARK_CONNECT_MASTER", "SPARK_CONNECT_PORT", "SPARK_CONNECT_DRIVER_HOST"}
    for setting in settings:
        assert f"${{{setting}" in launcher, f"the image's launcher does not read {setting}"
    assert env["SPARK_CONNECT_DRIVER_HOST"] == POD_IP  # for Spark's executors
    master = env["SPARK_CONNECT_MASTER"]
    assert master.startswith(("spark://", "k8s://", "yarn"))  # a cluster, not local[*]
    if name == EXAMPLE:
        assert f"spark.master={master}" in overlay_kustomization_literals("spark-connect-config")
    # Every port Spark binds is a container port.
    defaults = spark_defaults(docs)
    ports = container_ports(spark)
    assert ports["connect"] == int(env["SPARK_CONNECT_PORT"])
    assert ports["driver"] == int(defaults["spark.driver.port"])
    assert ports["block-manager"] == int(defaults["spark.driver.blockManager.port"])
    assert ports["ui"] == int(defaults["spark.ui.port"])
    # Scratch space on the writable emptyDir.
    assert defaults["spark.local.dir"].startswith("/tmp/")
    assert defaults["spark.sql.warehouse.dir"].startswith("/tmp/")
    assert each["workingDir"] == "/tmp"


def overlay_kustomization_literals(generator: str) -> list[str]:
    (entry,) = [g for g in overlay_kustomization()["configMapGenerator"] if g["name"] == generator]
    literals: list[str] = entry["literals"]
    return literals


@pytest.mark.parametrize("name", RENDERS)
def test_only_executors_may_call_spark_connect(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    policy = find(docs, "NetworkPolicy", SPARK_CONNECT)
    spark = find(docs, "Deployment", SPARK_CONNECT)
    assert selected_workloads(docs, policy["spec"]["podSelector"]["matchLabels"]) == [spark]
    connect_port = container_ports(spark)["connect"]
    spark_ports = set(container_ports(spark).values())
    for rule in policy["spec"]["ingress"]:
        numbers = {port["port"] for port in rule["ports"]}
        assert numbers <= spark_ports
        if connect_port in numbers:
            assert numbers == {connect_port}
            (peer,) = rule["from"]
            assert selected_workloads(docs, peer["podSelector"]["matchLabels"]) == [
                find(docs, "Deployment", EXECUTOR)
            ]


# --- every workload ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_every_container_asks_for_resources(renders: dict[str, list[Doc]], name: str) -> None:
    for workload in workloads(renders[name]):
        for each in containers(workload):
            label = f"{workload['metadata']['name']}/{each['name']}"
            requests = each["resources"]["requests"]
            assert quantity(requests["cpu"]) > 0, label
            assert quantity(requests["memory"]) >= 2**28, label
            # A memory limit (no CPU limit: throttling would slow answers and heartbeats).
            assert quantity(each["resources"]["limits"]["memory"]) >= quantity(requests["memory"]), label


@pytest.mark.parametrize("name", RENDERS)
def test_every_pod_runs_as_the_images_non_root_user(renders: dict[str, list[Doc]], name: str) -> None:
    """The `restricted` Pod Security Standard, and nothing a pod does not need."""
    found = workloads(renders[name])
    assert {w["metadata"]["name"] for w in found} == {CONTROL_PLANE, EXECUTOR, SPARK_CONNECT}
    for workload in found:
        spec = pod_spec(workload)
        label = workload["metadata"]["name"]
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, label
        assert context["runAsUser"] == IMAGE_UID, label
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, label
        assert not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")), label
        assert all("hostPath" not in volume for volume in spec.get("volumes", [])), label
        # No Kubernetes API token, and no SERVICE_HOST/PORT variables among the SLUICEWAY_* settings.
        assert spec["automountServiceAccountToken"] is False, label
        assert spec["enableServiceLinks"] is False, label
        find(renders[name], "ServiceAccount", spec["serviceAccountName"])
        for each in containers(workload):
            own = each["securityContext"]
            assert own["allowPrivilegeEscalation"] is False, label
            assert own["capabilities"]["drop"] == ["ALL"], label
            assert own["readOnlyRootFilesystem"] is True, label
            assert not own.get("privileged", False), label
            assert own.get("runAsUser", IMAGE_UID) == IMAGE_UID, label
            assert "/tmp" in {m["mountPath"] for m in each["volumeMounts"]}, f"{label}: no writable /tmp"
        for volume in spec.get("volumes", []):
            secret = volume.get("secret", {})
            if any(not item["key"].endswith((".crt", ".pem")) for item in secret.get("items", [])):
                assert secret["defaultMode"] & 0o007 == 0, f"{label}: {volume['name']} is world-readable"


@pytest.mark.parametrize("name", RENDERS)
def test_every_variable_reference_is_defined(renders: dict[str, list[Doc]], name: str) -> None:
    """Kubernetes leaves an unknown `$(NAME)` as it is, silently: each must name a variable of the
    container (defined before, for a variable's own value)."""
    for workload in workloads(renders[name]):
        for each in containers(workload):
            defined: list[str] = []
            for variable in each.get("env", []):
                for used in VARIABLE.findall(variable.get("value", "")):
                    assert used in defined, f"{variable['name']} uses $({used}) before it is defined"
                defined.append(variable["name"])
            for text in [*each.get("command", []), *each.get("args", [])]:
                for used in VARIABLE.findall(text):
                    assert used in defined, f"{workload['metadata']['name']}: $({used}) in {text!r}"


@pytest.mark.parametrize("name", RENDERS)
def test_every_config_map_a_workload_reads_is_rendered(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    for workload in workloads(docs):
        for config_map, key in config_map_references(workload):
            assert key in config_map_data(docs, config_map), f"ConfigMap {config_map} has no key {key}"


def test_the_secrets_are_the_operators_and_listed(renders: dict[str, list[Doc]]) -> None:
    """No render holds a Secret (no credentials in the repository); every Secret and key a workload
    reads, with or without TLS, is in operator-secrets.yaml, and that list names nothing else."""
    used: set[tuple[str, str]] = set()
    for name in RENDERS:
        assert [doc for doc in renders[name] if doc["kind"] == "Secret"] == []
        for workload in workloads(renders[name]):
            used |= secret_references(workload)
    listed = {(secret, key) for secret, keys in operator_secrets().items() for key in keys}
    assert used == listed
    without_tls = {
        ref
        for name in (BASE_RENDER, EXAMPLE)
        for w in workloads(renders[name])
        for ref in secret_references(w)
    }
    assert {secret for secret, _ in used - without_tls} == {"sluiceway-tls"}


@pytest.mark.parametrize("name", RENDERS)
def test_service_ports_are_container_ports(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    services = [doc for doc in docs if doc["kind"] == "Service"]
    assert {s["metadata"]["name"] for s in services} == {
        CONTROL_PLANE,
        f"{CONTROL_PLANE}-headless",
        SPARK_CONNECT,
    }
    for service in services:
        selected = selected_workloads(docs, service["spec"]["selector"])
        assert selected, f"Service {service['metadata']['name']} selects no pods"
        for port in service["spec"]["ports"]:
            for workload in selected:
                ports = container_ports(workload)
                target = port["targetPort"]
                number = ports.get(target) if isinstance(target, str) else target
                assert number in ports.values(), f"{service['metadata']['name']}:{port['port']} → {target}"
                # Clients and advertised addresses use the same numbers inside and outside the pod.
                assert number == port["port"]


@pytest.mark.parametrize("name", RENDERS)
def test_prometheus_annotations_name_the_metrics_port(renders: dict[str, list[Doc]], name: str) -> None:
    docs = renders[name]
    scraped = set()
    for workload in workloads(docs):
        annotations = pod_template(workload)["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") != "true":
            continue
        scraped.add(workload["metadata"]["name"])
        assert annotations["prometheus.io/path"] == "/metrics"
        assert container_ports(workload)["metrics"] == int(annotations["prometheus.io/port"])
    # Spark Connect serves no /metrics; the processes' listeners are checked in the tests above.
    assert scraped == {CONTROL_PLANE, EXECUTOR}


def test_the_image_and_its_tag_come_from_the_overlay(renders: dict[str, list[Doc]]) -> None:
    images = [c["image"] for w in workloads(renders[BASE_RENDER]) for c in containers(w)]
    assert images and set(images) == {IMAGE}  # untagged in the base
    (entry,) = [image for image in overlay_kustomization()["images"] if image["name"] == IMAGE]
    assert entry["newTag"] and entry["newTag"] != "latest"
    expected = f"{entry.get('newName', IMAGE)}:{entry['newTag']}"
    for name in (EXAMPLE, EXAMPLE_TLS):
        assert {c["image"] for w in workloads(renders[name]) for c in containers(w)} == {expected}


def test_the_overlay_sets_namespace_executors_and_its_patch(renders: dict[str, list[Doc]]) -> None:
    overlay = overlay_kustomization()
    docs = renders[EXAMPLE]
    namespace = find(docs, "Namespace", overlay["namespace"])
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name in (EXAMPLE, EXAMPLE_TLS):  # what components/tls adds too
        namespaced = [doc for doc in renders[name] if doc["kind"] != "Namespace"]
        assert {namespace_of(doc) for doc in namespaced} == {overlay["namespace"]}
    (count,) = [entry["count"] for entry in overlay["replicas"] if entry["name"] == EXECUTOR]
    assert find(docs, "Deployment", EXECUTOR)["spec"]["replicas"] == count
    assert count != find(renders[BASE_RENDER], "Deployment", EXECUTOR)["spec"]["replicas"]
    # The JSON6902 patch: one more executor flag, and more memory.
    base_args = container(find(renders[BASE_RENDER], "Deployment", EXECUTOR), "executor")["args"]
    patched = container(find(docs, "Deployment", EXECUTOR), "executor")
    assert patched["args"] == [*base_args, "--max-tasks=8"]
    assert patched["resources"]["limits"]["memory"] == "2Gi"
    # Kafka's address reaches the control plane's variables.
    bootstrap = overlay_kustomization_literals("sluiceway-worker-config")[0].partition("=")[2]
    assert config_map_data(docs, sluiceway_worker_config(docs))["bootstrap.servers"] == bootstrap


def test_the_pods_fit_the_image(renders: dict[str, list[Doc]]) -> None:
    """deploy/image/Dockerfile: its user is the pods' runAsUser, and the commands the pods and their
    probes run are where it puts them (on its PATH: sluiceway in the venv; the Spark launcher and
    the health check in /usr/local/bin, first on the PATH of the python base images)."""
    dockerfile = DOCKERFILE.read_text()
    assert re.search(rf"^USER {IMAGE_UID}(:{IMAGE_UID})?$", dockerfile, re.MULTILINE)
    for script, command in (
        (SPARK_LAUNCHER, SPARK_LAUNCHER_COMMAND),
        (HEALTHCHECK_SCRIPT, HEALTHCHECK_COMMAND),
    ):
        assert re.search(
            rf"^COPY --chmod=0755 deploy/image/{re.escape(script.name)} /usr/local/bin/{command}$",
            dockerfile,
            re.MULTILINE,
        ), f"the image does not install {script.name} as {command}"
    path = re.search(r"\bPATH=(\S+)", dockerfile)
    assert path is not None
    assert {"/opt/sluiceway/bin", "$PATH"} <= set(path.group(1).split(":"))
    commands = {
        c.get("command", [None])[0]
        for name in RENDERS
        for w in workloads(renders[name])
        for c in containers(w)
    }
    server = container(find(renders[EXAMPLE_TLS], "StatefulSet", CONTROL_PLANE), "server")
    commands |= {server[probe]["exec"]["command"][0] for probe in PROBE_SERVICES}
    assert commands == {"sluiceway", SPARK_LAUNCHER_COMMAND, HEALTHCHECK_COMMAND}


# --- the exec probes of components/tls, against a real server -----------------------------------


@dataclass
class TlsReplica:
    """A gRPC health server over mutual TLS standing for the first replica of the TLS render, and
    what the health check finds in that replica's pod: the pod's files (with real certificates,
    certified for the advertised name), the replica's command line under a /proc, its variables."""

    port: int
    servicer: health.HealthServicer
    advertised_host: str
    view: ContainerView
    arguments: list[str]  # after `sluiceway server`
    proc: Path
    probes: dict[str, list[str]]


@pytest.fixture
def tls_replica(
    renders: dict[str, list[Doc]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TlsReplica]:
    docs = renders[EXAMPLE_TLS]
    statefulset = find(docs, "StatefulSet", CONTROL_PLANE)
    server_container = container(statefulset, "server")
    config, view = load_control_plane(docs, tmp_path / "pod", monkeypatch)
    advertised_host = healthcheck.host_of(config.advertised_address())
    namespace = namespace_of(statefulset)
    assert advertised_host == f"{CONTROL_PLANE}-0.{CONTROL_PLANE}-headless.{namespace}.svc"
    certificates = make_dev_certificates(tmp_path / "certs", (), hosts=(advertised_host,))
    # The Secret's files where the pod mounts them, in place of the stand-ins the view wrote.
    for key, made in (
        ("tls.certificate.file", certificates.server.certificate),
        ("tls.key.file", certificates.server.key),
        ("tls.ca.file", certificates.ca_file),
    ):
        assert view.unrooted(config.get(key)) in TLS_FILES
        Path(config.get(key)).write_bytes(made.read_bytes())
    credentials = grpc.ssl_server_credentials(
        [(certificates.server.key.read_bytes(), certificates.server.certificate.read_bytes())],
        root_certificates=certificates.ca_file.read_bytes(),
        require_client_auth=True,  # as tls.client.auth=required: the check must show a certificate
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    # The replica's process as /proc shows it: the venv's Python running the console script.
    argv = ["/opt/sluiceway/bin/python", f"/opt/sluiceway/bin/{server_container['command'][0]}", *view.argv]
    role = healthcheck.role_of(argv)
    assert role is not None and role[0] == "server"
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "cmdline").write_bytes(b"".join(arg.encode() + b"\0" for arg in argv))
    probes = {probe: server_container[probe]["exec"]["command"] for probe in PROBE_SERVICES}
    try:
        yield TlsReplica(port, servicer, advertised_host, view, list(role[1]), proc, probes)
    finally:
        server.stop(None)


def run_probe(replica: TlsReplica, probe: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> int:
    """The exit status of `probe`'s command in the pod (its variables, plus `env`). The pod's
    replica listens on 0.0.0.0:8083, which the check asks on 127.0.0.1:8083; the test's server is
    on another port, which the check's own variable gives it."""
    command = replica.probes[probe]
    assert command[0] == HEALTHCHECK_COMMAND
    address = {healthcheck.ADDRESS_ENV: f"127.0.0.1:{replica.port}"}
    with process_environment(monkeypatch, {**replica.view.env, **address, **env}):
        return healthcheck.main(command[1:], replica.proc)


def test_the_tls_probes_report_each_services_status(
    tls_replica: TlsReplica, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    tls_replica.servicer.set("", serving)
    tls_replica.servicer.set(LIVENESS_SERVICE, serving)
    for probe in PROBE_SERVICES:
        assert run_probe(tls_replica, probe, monkeypatch) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.splitlines() == [
        "healthy: server (pid 1)",
        f"healthy: server (pid 1, health service '{LIVENESS_SERVICE}')",
        f"healthy: server (pid 1, health service '{LIVENESS_SERVICE}')",
    ]
    # A draining replica: out of the Services' endpoints, not restarted.
    tls_replica.servicer.set("", not_serving)
    assert run_probe(tls_replica, "readinessProbe", monkeypatch) == 1
    assert "is NOT_SERVING (health service '')" in capsys.readouterr().out
    assert run_probe(tls_replica, "livenessProbe", monkeypatch) == 0
    assert run_probe(tls_replica, "startupProbe", monkeypatch) == 0
    # Liveness NOT_SERVING (which the server never answers, but a probe must not pass it).
    tls_replica.servicer.set(LIVENESS_SERVICE, not_serving)
    assert run_probe(tls_replica, "livenessProbe", monkeypatch) == 1
    assert f"is NOT_SERVING (health service '{LIVENESS_SERVICE}')" in capsys.readouterr().out


def test_the_tls_probes_verify_the_advertised_name_and_show_the_certificate(
    tls_replica: TlsReplica, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tls_replica.servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    tls_replica.servicer.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    with process_environment(monkeypatch, tls_replica.view.env):
        target = healthcheck.server_target(tls_replica.arguments)
    # In the pod it asks its own replica on loopback, verifying the name the replica advertises, and
    # trusts the Secret's CA and shows the Secret's certificate (which the test's server requires).
    assert target.address == f"127.0.0.1:{GRPC_PORT}"
    assert dict(target.options)["grpc.ssl_target_name_override"] == tls_replica.advertised_host
    security = target.security
    assert security.ca_file is not None and security.cert_file is not None and security.key_file is not None
    files = (security.ca_file, security.cert_file, security.key_file)
    assert tuple(tls_replica.view.unrooted(path) for path in files) == (
        "/etc/sluiceway/tls/ca.crt",
        "/etc/sluiceway/tls/tls.crt",
        "/etc/sluiceway/tls/tls.key",
    )
    # A name the certificate is not for fails every probe.
    other = f"{CONTROL_PLANE}-9.example.org:{GRPC_PORT}"
    for probe in PROBE_SERVICES:
        assert run_probe(tls_replica, probe, monkeypatch, SLUICEWAY_ADVERTISED_LISTENERS=other) == 1
        assert "(UNAVAILABLE" in capsys.readouterr().out
