"""The release check against the real API server and registry: what it writes, what a
failure keeps, the Events it posts, and the cluster choices that follow the list."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from tests.component.controller.conftest import Objects, Workload, condition, eventually
from tests.component.releasecheck.conftest import CheckingOperator, Installation, Repositories
from tests.harness import faultproxy

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

TALOS = ["v1.14.3", "v1.14.4", "1.14.9", "v1.15.0-beta.0", "v1.13.2"]
KUBERNETES = ["v1.36.6", "v1.36.7", "v1.37.1", "1.37.2"]
CHART = ["0.1.0", "0.2.0", "0.3.0-rc.1"]


async def seeded(repositories: Repositories) -> None:
    await repositories.seed("installer-base", TALOS)
    await repositories.seed("kubelet", KUBERNETES)
    await repositories.seed("charts/ichor", CHART)


def targets(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (body.get("status") or {}).get("upgradeTargets") or {}
    return found


def latest(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (body.get("status") or {}).get("latestRelease") or {}
    return found


async def checks_pass(operator: CheckingOperator, count: int) -> None:
    """Wait until ``count`` more checks have run and written."""
    start = operator.check.checks
    await eventually(
        lambda: asyncio.sleep(0, operator.check.checks),
        lambda n: n >= start + count,
        what=f"{count} more checks",
    )
    await asyncio.sleep(0.5)  # the last write reaches the API server


async def test_status_is_written_from_a_real_listing(
    checking_operator: CheckingOperator, installation: Installation, repositories: Repositories
) -> None:
    await seeded(repositories)
    stale = {"upgradeTargets": {"cilium": ["1.20.5"], "ciliumError": "an earlier controller"}}
    await installation.apply(repositories.spec(), status=stale)
    body = await eventually(
        installation.get,
        lambda b: "talos" in targets(b) and "cilium" not in targets(b),
        what="upgradeTargets written and the Cilium list cleared",
    )
    assert targets(body)["talos"] == ["v1.14.4", "v1.14.3", "v1.13.2"]
    assert targets(body)["kubernetes"] == ["v1.37.1", "v1.36.7", "v1.36.6"]
    assert "checkedAt" in targets(body)
    for gone in ("cilium", "ciliumError", "error", "talosError", "kubernetesError"):
        assert gone not in targets(body)
    assert latest(body) | {"checkedAt": None, "listedAt": None} == {
        "checkedAt": None,
        "listedAt": None,
        "version": "0.2.0",
        "running": "0.1.0",
        "newer": True,
    }
    # each list listed whole by this check, none failing
    assert latest(body)["listedAt"] == latest(body)["checkedAt"]
    for name in ("talos", "kubernetes"):
        assert targets(body)[f"{name}ListedAt"] == targets(body)["checkedAt"]
        assert f"{name}FailingSince" not in targets(body)
    upgrade = condition(body, "IchorUpgradeAvailable")
    assert (upgrade["status"], upgrade["reason"]) == ("True", "UpgradeAvailable")
    assert "Ichor 0.2.0 is published" in upgrade["message"]
    assert condition(body, "ReleasesListed")["status"] == "True"
    assert body["status"]["observedGeneration"] == body["metadata"]["generation"]
    assert await installation.events() == []


async def test_a_missing_kubernetes_repository_keeps_the_talos_list_and_its_own_error(
    checking_operator: CheckingOperator, installation: Installation, repositories: Repositories
) -> None:
    await seeded(repositories)
    await installation.apply(repositories.spec())
    await eventually(installation.get, lambda b: "kubernetes" in targets(b), what="first list")

    await repositories.seed("installer-base", ["v1.14.5"])
    missing = repositories.reference("no-such-kubelet")
    await installation.apply(repositories.spec(kubernetesRepository=missing))
    body = await eventually(
        installation.get,
        lambda b: "kubernetesError" in targets(b) and "v1.14.5" in targets(b).get("talos", []),
        what="the Kubernetes failure next to a fresh Talos list",
    )
    listed = targets(body)
    assert listed["kubernetes"] == ["v1.37.1", "v1.36.7", "v1.36.6"]  # the last good list
    assert "no-such-kubelet" in listed["kubernetesError"]
    assert "no such repository" in listed["kubernetesError"]
    assert "talosError" not in listed
    assert listed["error"] == listed["kubernetesError"]
    assert "error" not in latest(body)  # the chart is untouched by it
    assert condition(body, "ReleasesListed")["reason"] == "ListingFailed"

    await checks_pass(checking_operator, 2)  # unchanged failing ticks
    failures = [e for e in await installation.events() if e[1] == "ReleaseListingFailed"]
    assert len(failures) == 1, failures
    type_, _, message = failures[0]
    assert type_ == "Warning"
    assert message.startswith("Kubernetes releases could not be listed: ")
    assert message.endswith("what was last listed (3 releases) is kept")

    await installation.apply(repositories.spec())
    body = await eventually(
        installation.get, lambda b: "kubernetesError" not in targets(b), what="recovery"
    )
    assert "error" not in targets(body)
    await checks_pass(checking_operator, 2)
    recoveries = [e for e in await installation.events() if e[1] == "ReleaseListingRecovered"]
    assert recoveries == [
        ("Normal", "ReleaseListingRecovered", "Kubernetes releases are listed again (3 releases)")
    ]


async def test_a_stopped_registry_keeps_every_last_good_list_and_recovers(
    checking_operator: CheckingOperator, installation: Installation, repositories: Repositories
) -> None:
    await seeded(repositories)
    await installation.apply(repositories.spec())
    good = await eventually(installation.get, lambda b: "kubernetes" in targets(b), what="lists")

    repositories.registry.stop()
    try:
        body = await eventually(
            installation.get,
            lambda b: (
                {"talosError", "kubernetesError"} <= targets(b).keys() and "error" in latest(b)
            ),
            what="every listing failed",
        )
        assert targets(body)["talos"] == targets(good)["talos"]
        assert targets(body)["kubernetes"] == targets(good)["kubernetes"]
        assert "unreachable" in targets(body)["talosError"]
        assert latest(body)["version"] == "0.2.0"
        assert condition(body, "IchorUpgradeAvailable")["status"] == "True"  # still known
        await checks_pass(checking_operator, 2)
    finally:
        repositories.registry.start()
    body = await eventually(
        installation.get,
        lambda b: "error" not in targets(b) and "error" not in latest(b),
        within=30,
        what="recovery after the registry came back",
    )
    await checks_pass(checking_operator, 1)
    reasons = [reason for _, reason, _ in await installation.events()]
    assert reasons.count("ReleaseListingFailed") == 3  # Talos, Kubernetes, the chart
    assert reasons.count("ReleaseListingRecovered") == 3


async def test_cluster_choices_follow_the_new_list(
    checking_operator: CheckingOperator,
    installation: Installation,
    repositories: Repositories,
    workload: Workload,
    objects: Objects,
) -> None:
    await repositories.seed("installer-base", ["v1.14.3"])
    await repositories.seed("kubelet", ["v1.36.6"])
    await repositories.seed("charts/ichor", ["0.1.0"])
    await workload.add_node("cp-0", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await installation.apply(repositories.spec())
    await objects.create_cluster("follows")
    body = await eventually(
        lambda: objects.cluster("follows"),
        lambda b: condition(b, "TalosUpgradeAvailable").get("reason") == "UpToDate",
        what="up to date with the first list",
    )
    assert condition(await installation.get(), "IchorUpgradeAvailable")["reason"] == "UpToDate"

    await repositories.seed("installer-base", ["v1.14.4"])
    await repositories.seed("kubelet", ["v1.36.7"])
    body = await eventually(
        lambda: objects.cluster("follows"),
        lambda b: (
            (b["status"].get("upgradeChoices") or {}).get("talos", {}).get("default") == "v1.14.4"
        ),
        what="the new Talos release offered",
    )
    choices = body["status"]["upgradeChoices"]
    assert choices["talos"]["patch"] == ["v1.14.4"]
    assert choices["kubernetes"]["default"] == "v1.36.7"
    assert condition(body, "TalosUpgradeAvailable")["status"] == "True"


async def test_a_disabled_check_lists_nothing_until_enabled(
    checking_operator: CheckingOperator, installation: Installation, repositories: Repositories
) -> None:
    await seeded(repositories)
    before = checking_operator.check.checks
    await installation.apply(repositories.spec(enabled=False))
    await asyncio.sleep(3)  # three intervals of the test's cap
    assert checking_operator.check.checks == before
    assert targets(await installation.get()) == {}

    await installation.apply(repositories.spec(enabled=True))
    await eventually(installation.get, lambda b: "talos" in targets(b), what="listed once on")


async def test_a_private_mirror_is_listed_with_the_pull_secret(
    checking_operator: CheckingOperator,
    installation: Installation,
    repositories: Repositories,
    kube_api: ApiClient,
    namespace: str,
) -> None:
    await seeded(repositories)
    # the token server grants repositories under private/ to the seeding credentials only
    private = repositories.registry.reference(f"private/{repositories.prefix}/installer-base")
    await repositories.registry.aseed(f"private/{repositories.prefix}/installer-base", TALOS)
    await installation.apply(repositories.spec(talosRepository=private))
    body = await eventually(
        installation.get, lambda b: "talosError" in targets(b), what="an anonymous refusal"
    )
    assert "refused" in targets(body)["talosError"]
    assert "talos" not in targets(body)

    user, password = repositories.registry.seed_credentials
    config = {"auths": {repositories.registry.host: {"username": user, "password": password}}}
    await client.CoreV1Api(kube_api).create_namespaced_secret(
        namespace,
        {  # type: ignore[arg-type]
            "metadata": {"name": "mirror"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": json.dumps(config)},
        },
    )
    secret = {"namespace": namespace, "name": "mirror"}
    await installation.apply(repositories.spec(talosRepository=private, pullSecretRef=secret))
    body = await eventually(
        installation.get, lambda b: "talosError" not in targets(b), what="the mirror listed"
    )
    assert targets(body)["talos"] == ["v1.14.4", "v1.14.3", "v1.13.2"]
    assert "kubernetes" in targets(body)  # same host, same credentials

    missing = {"namespace": namespace, "name": "no-such-secret"}
    await installation.apply(repositories.spec(talosRepository=private, pullSecretRef=missing))
    body = await eventually(
        installation.get, lambda b: "talosError" in targets(b), what="the missing Secret"
    )
    assert "does not exist" in targets(body)["talosError"]
    assert targets(body)["talos"] == ["v1.14.4", "v1.14.3", "v1.13.2"]  # kept


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (faultproxy.status(500), "answered 500"),
        (faultproxy.Fault(kind=faultproxy.FaultKind.NOT_JSON), "not JSON"),
        (faultproxy.Fault(kind=faultproxy.FaultKind.LINK_LOOP), "loops"),
        (faultproxy.Fault(kind=faultproxy.FaultKind.HALF_BODY), "page 1"),
    ],
    ids=["500", "not json", "link loop", "half a body"],
)
async def test_a_garbled_kubernetes_listing_keeps_the_last_good_list(
    checking_operator: CheckingOperator,
    installation: Installation,
    repositories: Repositories,
    fault_proxy: faultproxy.FaultProxy,
    fault: faultproxy.Fault,
    words: str,
) -> None:
    await seeded(repositories)
    through_proxy = fault_proxy.reference(repositories.name("kubelet"))
    await installation.apply(repositories.spec(kubernetesRepository=through_proxy))
    good = await eventually(installation.get, lambda b: "kubernetes" in targets(b), what="lists")

    fault.path_contains = f"{repositories.name('kubelet')}/tags/list"
    fault_proxy.set_faults(fault)
    await repositories.seed("installer-base", ["v1.14.5"])
    body = await eventually(
        installation.get,
        lambda b: "kubernetesError" in targets(b) and "v1.14.5" in targets(b)["talos"],
        what="the Kubernetes failure next to a fresh Talos list",
    )
    assert words in targets(body)["kubernetesError"], targets(body)["kubernetesError"]
    assert targets(body)["kubernetes"] == targets(good)["kubernetes"]
    assert "talosError" not in targets(body)
