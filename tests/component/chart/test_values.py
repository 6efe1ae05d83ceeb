"""The chart's values for the Jobs, air gaps, the Pod's security and placement, JSON logs,
the ServiceMonitor and the readiness probe, through ``helm template``: each reaches what
it names (the executor's values all the way to the Job the operator builds, read by the
operator's own settings from the rendered environment), and the schema refuses each
value of the wrong form, and every value that would weaken the container."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs
from ichor.settings import Settings
from tests.component.chart import helm
from tests.component.chart.helm import Object

pytestmark = pytest.mark.component

SCHEMATIC = "a" * 64
JOBS: dict[str, Any] = {
    "executor": {
        "imageFactory": "factory.mirror.example:5000",
        "ciliumChart": "oci://mirror.example/charts/cilium",
        "talosctlImage": "mirror.example/siderolabs/talosctl:{version}",
        "helmImage": "mirror.example/alpine/helm:3.19.0",
        "nodeSelector": {"node-role.example.com/upgrades": "true"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "upgrades", "effect": "NoSchedule"}
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "upgrades",
        "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "1Gi"}},
        "imagePullSecrets": ["mirror-pull", "backup-pull"],
    }
}


def _settings(objects: list[Object]) -> Settings:
    """The operator's settings as it reads them from the rendered Deployment."""
    return Settings.from_env(helm.env(objects))


def _ref(type_: OperationType) -> jobs.OperationRef:
    return jobs.OperationRef(namespace="t", name="op", uid="u", cluster="prod", type=type_)


def test_the_executor_values_reach_the_jobs_the_operator_builds() -> None:
    executor = _settings(helm.template(JOBS)).operations.executor
    node = jobs.TargetNode(name="cp-1", address="10.0.0.1", role=jobs.NodeRole.CONTROL_PLANE)
    talos = jobs.node_job(
        operation=_ref(OperationType.TALOS), name="ichor-talos-op-node-cp-1-0", version="v1.14.5",
        node=node, image=f"{executor.image_factory}/nocloud-installer/{SCHEMATIC}:v1.14.5",
        drain=True, drain_timeout="5m", reboot_mode="default", avoid_node=False,
        talosconfig=jobs.SecretMount("prod-talosconfig", "talosconfig"), settings=executor,
    )  # fmt: skip
    cilium = jobs.cilium_job(
        operation=_ref(OperationType.CNI), kubeconfig=None, image_override=None, settings=executor
    )
    (upgrade, *_) = jobs.commands(talos)
    assert upgrade[1] == "mirror.example/siderolabs/talosctl:v1.14.5"
    assert f"factory.mirror.example:5000/nocloud-installer/{SCHEMATIC}:v1.14.5" in upgrade[2]
    ((_, image, args),) = jobs.commands(cilium)
    assert image == "mirror.example/alpine/helm:3.19.0"
    assert args[2] == "oci://mirror.example/charts/cilium"
    for job in (talos, cilium):
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == JOBS["executor"]["nodeSelector"]
        assert pod["tolerations"] == JOBS["executor"]["tolerations"]
        assert pod["affinity"] == JOBS["executor"]["affinity"]
        assert pod["priorityClassName"] == "upgrades"
        assert pod["imagePullSecrets"] == [{"name": "mirror-pull"}, {"name": "backup-pull"}]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert container["resources"] == JOBS["executor"]["resources"]


def test_without_executor_values_the_operator_keeps_its_defaults() -> None:
    objects = helm.template()
    env = helm.env(objects)
    for name in (
        "ICHOR_IMAGE_FACTORY", "ICHOR_CILIUM_CHART",
        "ICHOR_EXECUTOR_NODE_SELECTOR", "ICHOR_EXECUTOR_TOLERATIONS", "ICHOR_EXECUTOR_AFFINITY",
        "ICHOR_EXECUTOR_PRIORITY_CLASS", "ICHOR_EXECUTOR_RESOURCES",
        "ICHOR_EXECUTOR_IMAGE_PULL_SECRETS", "ICHOR_LOG_FORMAT",
    ):  # fmt: skip
        assert name not in env
    executor = _settings(objects).operations.executor
    assert executor.image_factory == "factory.talos.dev"


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"executor": {"defaultSchematic": "376567988ad3"}}, "additional properties"),
        ({"executor": {"imageFactory": "https://factory.talos.dev"}}, "/executor/imageFactory"),
        ({"executor": {"ciliumChart": "http://mirror/cilium"}}, "/executor/ciliumChart"),
        ({"executor": {"nodeSelector": {"zone": 1}}}, "/executor/nodeSelector/zone"),
        ({"executor": {"imagePullSecrets": ["a,b"]}}, "/executor/imagePullSecrets/0"),
        ({"executor": {"imagePullSecrets": [{"name": "a"}]}}, "/executor/imagePullSecrets/0"),
        ({"executor": {"resources": {"cpu": "1"}}}, "additional properties 'cpu' not allowed"),
        ({"executor": {"tolerations": {"key": "a"}}}, "/executor/tolerations"),
        ({"executor": {"image_factory": "x"}}, "additional properties 'image_factory'"),
        ({"logFormat": "xml"}, "/logFormat"),
        ({"shutdownDelaySeconds": -1}, "/shutdownDelaySeconds"),
        ({"securityContext": {"privileged": True}}, "/securityContext/privileged"),
        ({"securityContext": {"allowPrivilegeEscalation": True}}, "allowPrivilegeEscalation"),
        ({"securityContext": {"readOnlyRootFilesystem": False}}, "readOnlyRootFilesystem"),
        ({"securityContext": {"runAsUser": 0}}, "/securityContext/runAsUser"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, "/podSecurityContext/runAsNonRoot"),
        ({"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "/topologySpreadConstraints/0"),
        ({"extraVolumeMounts": [{"name": "x"}]}, "/extraVolumeMounts/0"),
        ({"metrics": {"serviceMonitor": {"scrapeTimeout": "soon"}}}, "scrapeTimeout"),
        ({"probes": {"readinessPort": 70000}}, "/probes/readinessPort"),
    ],
    ids=[
        "short-schematic", "factory-with-scheme", "chart-over-http", "selector-number",
        "pull-secret-comma", "pull-secret-object", "resources-flat", "tolerations-object",
        "executor-typo", "log-format", "negative-delay", "privileged", "escalation",
        "writable-root", "root-container", "pod-may-run-as-root", "root-pod",
        "spread-incomplete", "mount-without-path", "scrape-timeout", "readiness-port",
    ],
)  # fmt: skip
def test_a_wrong_value_is_refused_by_the_schema(values: dict[str, Any], words: str) -> None:
    result = helm.run("template", "x", str(helm.CHART), values=values, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert words in result.stderr, result.stderr


def _pod(objects: list[Object]) -> Object:
    pod: Object = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    return pod


def test_security_contexts_are_values_whose_defaults_are_the_hardened_ones() -> None:
    defaults = helm.template()
    pod, operator = _pod(defaults), helm.container(defaults)
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert operator["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # OpenShift: the platform assigns the user and group, the rest stays
    assigned = helm.template(
        {"podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": None}}
    )
    context = _pod(assigned)["securityContext"]
    assert context == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert helm.container(assigned)["securityContext"] == operator["securityContext"]
    more = helm.template({"securityContext": {"runAsUser": 1001}})
    merged = helm.container(more)["securityContext"]
    assert merged["runAsUser"] == 1001
    assert merged["readOnlyRootFilesystem"] is True


def test_spread_extra_volumes_and_json_logs() -> None:
    objects = helm.template(
        {
            "replicas": 3,
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"team": "upgrades"}}},
            ],
            "extraVolumes": [{"name": "ca", "configMap": {"name": "corp-ca"}}],
            "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True}],
            "logFormat": "json",
        }
    )  # fmt: skip
    pod = _pod(objects)
    first, second = pod["topologySpreadConstraints"]
    labels = helm.one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert first["labelSelector"] == {"matchLabels": labels}
    assert second["labelSelector"] == {"matchLabels": {"team": "upgrades"}}
    assert {"name": "ca", "configMap": {"name": "corp-ca"}} in pod["volumes"]
    mounts = helm.container(objects)["volumeMounts"]
    assert {"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True} in mounts
    assert {m["name"] for m in mounts} >= {"webhook-tls", "tmp"}
    assert helm.env(objects)["ICHOR_LOG_FORMAT"] == "json"
    assert _settings(objects).log_format == "json"
    assert "topologySpreadConstraints" not in _pod(helm.template())


def test_service_monitor_relabels_and_times_out_as_told() -> None:
    relabel = [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
    drop = [{"sourceLabels": ["__name__"], "regex": "python_gc_.*", "action": "drop"}]
    objects = helm.template(
        {
            "metrics": {
                "serviceMonitor": {
                    "enabled": True,
                    "scrapeTimeout": "10s",
                    "relabelings": relabel,
                    "metricRelabelings": drop,
                }
            }
        }
    )
    (endpoint,) = helm.one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scrapeTimeout"] == "10s"
    assert endpoint["relabelings"] == relabel
    assert endpoint["metricRelabelings"] == drop
    plain = helm.template({"metrics": {"serviceMonitor": {"enabled": True}}})
    (endpoint,) = helm.one(plain, "ServiceMonitor")["spec"]["endpoints"]
    # honorLabels: the operator's `namespace` label is a TalosCluster's (docs/metrics.md)
    assert set(endpoint) == {"port", "path", "interval", "honorLabels"}
    assert endpoint["honorLabels"] is True


def test_readiness_is_its_own_endpoint_and_the_pod_drains_before_it_stops() -> None:
    objects = helm.template({"shutdownDelaySeconds": 7})
    operator = helm.container(objects)
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "readyz"}
    endpoint = helm.env(objects)["ICHOR_READINESS_ENDPOINT"]
    assert endpoint == f"http://0.0.0.0:{ports['readyz']}/readyz"
    assert _settings(objects).readiness_endpoint == endpoint
    assert operator["lifecycle"]["preStop"] == {
        "exec": {"command": ["sh", "-c", "kill -USR1 1; sleep 7"]}
    }
    assert _pod(objects)["terminationGracePeriodSeconds"] == 37
    ingress = helm.one(objects, "NetworkPolicy", "ichor-webhook-ingress")
    admitted = {p["port"] for rule in ingress["spec"]["ingress"] for p in rule["ports"]}
    assert ports["readyz"] in admitted
