"""The Job builders, without a cluster: names, order, images, commands and credentials."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs
from ichor.controller.talosoperation.jobs import NodeRole, TargetNode
from ichor.release.release_set import PINNED
from ichor.settings import DEFAULT_CILIUM_CHART, DEFAULT_SCHEMATIC, ExecutorSettings

UID = "0b6c0f0e-7f1b-4b8e-9d55-3f0a0c1e2d3f"
SETTINGS = ExecutorSettings()
TALOSCONFIG = jobs.SecretMount(secret="prod-talosconfig", key="talosconfig")
NODES = (
    TargetNode(name="worker-b", address="10.0.0.12", role=NodeRole.WORKER),
    TargetNode(name="cp-2", address="10.0.0.2", role=NodeRole.CONTROL_PLANE),
    TargetNode(name="worker-a", address="10.0.0.11", role=NodeRole.WORKER),
    TargetNode(name="cp-1", address="10.0.0.1", role=NodeRole.CONTROL_PLANE),
)
#: Each node's own installer (ichor.upgrade.node_images builds them from the node).
IMAGES = {
    "cp-1": f"factory.talos.dev/metal-installer/{DEFAULT_SCHEMATIC}:v1.14.4",
    "cp-2": f"factory.talos.dev/aws-installer/{DEFAULT_SCHEMATIC}:v1.14.4",
    "worker-a": "factory.talos.dev/metal-installer-secureboot/abc123:v1.14.4",
    "worker-b": "factory.local/metal-installer/def456:v1.14.4",
}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def ref(
    type_: OperationType = OperationType.TALOS, *, name: str = "prod-talos"
) -> jobs.OperationRef:
    return jobs.OperationRef(namespace="team-a", name=name, uid=UID, cluster="prod", type=type_)


def talos(**overrides: Any) -> jobs.JobManifest:
    arguments: dict[str, Any] = {
        "operation": ref(),
        "version": "v1.14.4",
        "nodes": NODES,
        "images": IMAGES,
        "talosconfig": TALOSCONFIG,
        "settings": SETTINGS,
    }
    arguments.update(overrides)
    return jobs.talos_job(**arguments)


@pytest.mark.parametrize(
    "name",
    ["prod-talos", "x", "UPPER.and_dots", "a" * 253, "---", "upgrade-prod-to-v1.14.4-now"],
)
@pytest.mark.parametrize("type_", list(OperationType))
def test_job_name_is_a_dns_label_of_at_most_63_characters(name: str, type_: OperationType) -> None:
    found = jobs.job_name(operation=name, uid=UID, type_=type_)
    assert len(found) <= 63
    assert DNS_LABEL.match(found), found
    assert found.startswith(f"ichor-{type_.value}-")


def test_job_name_is_the_same_for_the_same_operation_and_differs_for_a_new_uid() -> None:
    first = jobs.job_name(operation="prod-talos", uid=UID, type_=OperationType.TALOS)
    again = jobs.job_name(operation="prod-talos", uid=UID, type_=OperationType.TALOS)
    recreated = jobs.job_name(operation="prod-talos", uid=UID[::-1], type_=OperationType.TALOS)
    assert first == again
    assert recreated != first


def test_the_manifest_is_owned_by_the_operation_and_never_retries() -> None:
    job = talos()
    (owner,) = job["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "name": "prod-talos",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": False,
    }
    assert job["metadata"]["name"] == jobs.job_name(
        operation="prod-talos", uid=UID, type_=OperationType.TALOS
    )
    assert job["metadata"]["namespace"] == "team-a"
    assert job["metadata"]["annotations"][jobs.CLUSTER_ANNOTATION] == "prod"
    assert job["metadata"]["labels"][jobs.MANAGED_BY_LABEL] == "ichor"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_talos_upgrades_one_node_per_step_control_plane_first() -> None:
    steps = jobs.commands(talos())
    upgrades = [args for _, _, args in steps if args[0] == "upgrade"]
    assert [args[args.index("--nodes") + 1] for args in upgrades] == [
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.11",
        "10.0.0.12",
    ]
    # init containers run one after the other; the last container only reports
    pod = talos()["spec"]["template"]["spec"]
    assert len(pod["initContainers"]) == 4
    assert pod["containers"][0]["args"][0] == "version"


def test_the_nodes_a_talos_job_upgrades_are_read_back_from_it_in_order() -> None:
    assert jobs.upgraded_nodes(talos()) == ("cp-1", "cp-2", "worker-a", "worker-b")
    cilium = jobs.cilium_job(
        operation=ref(OperationType.CNI), kubeconfig=None, image_override=None, settings=SETTINGS
    )
    assert jobs.upgraded_nodes(cilium) == ()
    assert jobs.upgraded_nodes({"spec": {"template": "garbage"}}) == ()
    assert jobs.upgraded_nodes({}) == ()


def test_each_node_is_upgraded_with_its_own_installer_one_image_per_invocation() -> None:
    """talosctl v1.13 takes one --image per invocation: each node's own container."""
    seen = {}
    for _, image, args in jobs.commands(talos()):
        assert image == "ghcr.io/siderolabs/talosctl:v1.14.4"
        if args[0] == "upgrade":
            assert args.count("--image") == 1
            node = {n.address: n.name for n in NODES}[args[args.index("--nodes") + 1]]
            seen[node] = args[args.index("--image") + 1]
    assert seen == IMAGES


def test_a_node_without_an_image_is_never_given_a_default() -> None:
    with pytest.raises(ValueError, match="no installer image for worker-b"):
        talos(images={k: v for k, v in IMAGES.items() if k != "worker-b"})


def test_a_read_job_runs_one_talosctl_get_per_resource_side_by_side() -> None:
    job = jobs.read_job(
        operation=ref(),
        name="ichor-read-x",
        talos_version="v1.14.3",
        reads=[("extensions", ["get", "extensions"]), ("platform", ["get", "platformmetadata"])],
        talosconfig=TALOSCONFIG,
        settings=SETTINGS,
    )
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["name"] == "ichor-read-x"
    assert "initContainers" not in pod
    assert [(c["name"], c["args"]) for c in pod["containers"]] == [
        ("extensions", ["get", "extensions"]),
        ("platform", ["get", "platformmetadata"]),
    ]
    assert {c["image"] for c in pod["containers"]} == {"ghcr.io/siderolabs/talosctl:v1.14.3"}
    assert job["spec"]["backoffLimit"] == 0


def test_a_read_job_goes_on_its_own_once_finished_and_a_job_that_acts_is_kept() -> None:
    """The executor deletes a read Job once it has read it. A create that lands after
    that (sent before the API server went away, stored after it came back) makes a Job
    no one reads: Kubernetes removes it an hour after it finishes. A Job that acts is
    the operation's record and is never removed on a timer."""
    read = jobs.read_job(
        operation=ref(),
        name="ichor-read-x",
        talos_version="v1.14.3",
        reads=[("extensions", ["get", "extensions"])],
        talosconfig=TALOSCONFIG,
        settings=SETTINGS,
    )
    assert read["spec"]["ttlSecondsAfterFinished"] == jobs.READ_TTL_SECONDS == 3600
    assert "ttlSecondsAfterFinished" not in talos()["spec"]


def test_talos_credentials_are_the_mounted_talosconfig_secret() -> None:
    pod = talos()["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "talosconfig"]
    assert volume["secret"]["secretName"] == "prod-talosconfig"
    assert volume["secret"]["items"] == [{"key": "talosconfig", "path": "config"}]
    assert pod["automountServiceAccountToken"] is False
    for container in [*pod["initContainers"], *pod["containers"]]:
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["TALOSCONFIG"] == f"{jobs.TALOSCONFIG_DIR}/config"
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert container["securityContext"]["runAsNonRoot"] is True


def test_talos_needs_a_node() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        talos(nodes=())


def test_kubernetes_runs_upgrade_k8s_through_a_control_plane_node_with_the_running_talosctl() -> (
    None
):
    job = jobs.kubernetes_job(
        operation=ref(OperationType.KUBERNETES),
        version="v1.37.1",
        talos="v1.14.3",
        control_plane=NODES[3],
        talosconfig=TALOSCONFIG,
        settings=SETTINGS,
    )
    assert jobs.commands(job) == [
        (
            "upgrade-k8s",
            "ghcr.io/siderolabs/talosctl:v1.14.3",
            ["upgrade-k8s", "--nodes", "10.0.0.1", "--to", "v1.37.1"],
        )
    ]


@pytest.mark.parametrize("kubeconfig", [None, jobs.SecretMount(secret="prod-kubeconfig", key="kc")])
def test_cilium_upgrades_the_release_to_the_embedded_chart(
    kubeconfig: jobs.SecretMount | None,
) -> None:
    job = jobs.cilium_job(
        operation=ref(OperationType.CNI),
        kubeconfig=kubeconfig,
        image_override=None,
        settings=SETTINGS,
    )
    ((_, image, args),) = jobs.commands(job)
    assert image == SETTINGS.helm_image
    assert args[:4] == ["upgrade", "cilium", DEFAULT_CILIUM_CHART, "--version"]
    assert args[4] == PINNED.cilium_chart
    assert "--set" not in args
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    if kubeconfig is None:
        assert "KUBECONFIG" not in env
        assert pod["automountServiceAccountToken"] is True
    else:
        assert env["KUBECONFIG"] == f"{jobs.KUBECONFIG_DIR}/config"
        assert pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["kubeconfig"]["secret"]["items"] == [{"key": "kc", "path": "config"}]


@pytest.mark.parametrize(
    ("recorded", "rendered"),
    [
        ("1.20.5", "v1.20.5"),
        ("v1.20.9", "v1.20.9"),
        ("1.20.4", None),
        ("1.20.3", None),
        (None, None),
        ("not-a-version", None),
    ],
)
def test_a_recorded_cilium_patch_is_rendered_only_while_newer_than_the_chart(
    recorded: str | None, rendered: str | None
) -> None:
    job = jobs.cilium_job(
        operation=ref(OperationType.CNI),
        kubeconfig=None,
        image_override=recorded,
        settings=SETTINGS,
    )
    ((_, _, args),) = jobs.commands(job)
    values = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    if rendered is None:
        assert values == []
    else:
        assert f"image.tag={rendered}" in values
        assert f"operator.image.tag={rendered}" in values
        assert f"hubble.relay.image.tag={rendered}" in values


def test_target_nodes_reads_addresses_and_roles_and_names_the_unaddressable() -> None:
    items: list[dict[str, Any]] = [
        {
            "metadata": {"name": "w1", "labels": {}},
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "w1"},
                    {"type": "InternalIP", "address": "10.0.0.5"},
                ]
            },
        },
        {
            "metadata": {"name": "cp", "labels": {jobs.CONTROL_PLANE_LABEL: ""}},
            "status": {"addresses": [{"type": "ExternalIP", "address": "192.0.2.1"}]},
        },
        {"metadata": {"name": "ghost"}, "status": {}},
    ]
    found = jobs.target_nodes(items)
    assert found.nodes == (
        TargetNode(name="cp", address="192.0.2.1", role=NodeRole.CONTROL_PLANE),
        TargetNode(name="w1", address="10.0.0.5", role=NodeRole.WORKER),
    )
    assert found.control_plane == (found.nodes[0],)
    assert found.unaddressable == ("ghost",)


def test_images_and_commands_come_from_the_operator_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ICHOR_TALOSCTL_IMAGE", "registry.local/talosctl:{version}-fips")
    monkeypatch.setenv("ICHOR_HELM_IMAGE", "registry.local/helm:4")
    monkeypatch.setenv("ICHOR_IMAGE_FACTORY", "factory.local")
    monkeypatch.setenv("ICHOR_TALOS_UPGRADE_ARGS", "--wait --stage")
    monkeypatch.setenv("ICHOR_CILIUM_CHART", "oci://registry.local/charts/cilium")
    monkeypatch.setenv("ICHOR_EXECUTOR_SERVICE_ACCOUNT", "ichor-executor")
    monkeypatch.setenv("ICHOR_JOB_DEADLINE", "600")
    settings = ExecutorSettings.from_env()
    job = talos(settings=settings)
    first = jobs.commands(job)[0]
    assert first[1] == "registry.local/talosctl:v1.14.4-fips"
    assert first[2][-2:] == ["--wait", "--stage"]
    assert IMAGES["cp-1"] in first[2]
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "ichor-executor"
    cilium = jobs.cilium_job(
        operation=ref(OperationType.CNI), kubeconfig=None, image_override=None, settings=settings
    )
    ((_, image, args),) = jobs.commands(cilium)
    assert image == "registry.local/helm:4"
    assert args[2] == "oci://registry.local/charts/cilium"


SCHEDULING = {
    "ICHOR_EXECUTOR_NODE_SELECTOR": '{"node-role.example.com/upgrades": "true"}',
    "ICHOR_EXECUTOR_TOLERATIONS": '[{"key": "dedicated", "operator": "Equal", '
    '"value": "upgrades", "effect": "NoSchedule"}]',
    "ICHOR_EXECUTOR_AFFINITY": '{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":'
    ' {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", '
    '"values": ["a"]}]}]}}}',
    "ICHOR_EXECUTOR_PRIORITY_CLASS": "system-cluster-critical",
    "ICHOR_EXECUTOR_RESOURCES": '{"requests": {"cpu": "100m", "memory": "128Mi"}, '
    '"limits": {"memory": "512Mi"}}',
    "ICHOR_EXECUTOR_IMAGE_PULL_SECRETS": "mirror-pull,,backup-pull",
}


def _every_job(settings: ExecutorSettings) -> list[jobs.JobManifest]:
    control_plane = NODES[3]
    return [
        talos(settings=settings),
        jobs.kubernetes_job(
            operation=ref(OperationType.KUBERNETES),
            version="v1.36.7",
            talos="v1.14.3",
            control_plane=control_plane,
            talosconfig=TALOSCONFIG,
            settings=settings,
        ),
        jobs.cilium_job(
            operation=ref(OperationType.CNI),
            kubeconfig=None,
            image_override=None,
            settings=settings,
        ),
    ]


def test_every_job_is_scheduled_and_pulled_as_the_chart_says() -> None:
    settings = ExecutorSettings.from_env(SCHEDULING)
    for job in _every_job(settings):
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"node-role.example.com/upgrades": "true"}
        assert pod["tolerations"] == [
            {"key": "dedicated", "operator": "Equal", "value": "upgrades", "effect": "NoSchedule"}
        ]
        assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert pod["priorityClassName"] == "system-cluster-critical"
        assert pod["imagePullSecrets"] == [{"name": "mirror-pull"}, {"name": "backup-pull"}]
        containers = [*pod.get("initContainers", []), *pod["containers"]]
        for container in containers:
            assert container["resources"] == {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"memory": "512Mi"},
            }
        # one container's resources are its own: changing one changes no other
        if len(containers) > 1:
            containers[0]["resources"]["limits"]["memory"] = "1Gi"
            assert containers[-1]["resources"]["limits"]["memory"] == "512Mi"
    assert settings.resources["limits"] == {"memory": "512Mi"}


def test_without_scheduling_values_the_jobs_are_as_before() -> None:
    for job in _every_job(SETTINGS):
        pod = job["spec"]["template"]["spec"]
        for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
            assert key not in pod
        assert "imagePullSecrets" not in pod
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert container["resources"] == {
                "requests": {"cpu": "50m", "memory": "64Mi"},
                "limits": {"memory": "256Mi"},
            }


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("ICHOR_EXECUTOR_TOLERATIONS", '{"key": "a"}', "must be a JSON list, not dict"),
        ("ICHOR_EXECUTOR_TOLERATIONS", '["a"]', "each item of its list must be a JSON object"),
        ("ICHOR_EXECUTOR_NODE_SELECTOR", '{"zone": 1}', "must be a string"),
        ("ICHOR_EXECUTOR_AFFINITY", "{nodeAffinity", "must be a JSON object"),
        ("ICHOR_EXECUTOR_RESOURCES", "[]", "must be a JSON object, not list"),
    ],
)
def test_a_scheduling_value_of_the_wrong_shape_stops_the_start_naming_it(
    variable: str, value: str, words: str
) -> None:
    from ichor.settings import SettingsError

    with pytest.raises(SettingsError, match=variable) as refused:
        ExecutorSettings.from_env({variable: value})
    assert words in str(refused.value)
