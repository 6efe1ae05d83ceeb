"""The plan: a server-side dry run of a TalosOperation create, through the real API server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER, PLAIN, Api
from tests.support import table

pytestmark = pytest.mark.component

CLUSTER = "prod"


def operation(kind: str, version: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"generateName": f"{kind}-"},
        "spec": {"clusterRef": {"name": spec.pop("cluster", CLUSTER)}, "type": kind, **spec},
    }
    if version is not None:
        body["spec"]["version"] = version
    return body


@pytest.fixture
def running(api: Api) -> Api:
    """Talos v1.13.2, Kubernetes v1.35.4 and Cilium 1.19.10; and an old one on Talos v1.11.5."""
    for name, fields in (
        (CLUSTER, {"talos": "v1.13.2", "kubernetes": "v1.35.4", "contract": "v1.13"}),
        ("old", {"talos": "v1.11.5", "kubernetes": "v1.34.2", "contract": "v1.11"}),
    ):
        created = api.create(harness.cluster_manifest(name, api.namespace, **fields), user=None)
        assert created.returncode == 0, created.stderr
    api.set_cilium(CLUSTER, "1.19.10")
    return api


REFUSALS = {
    "pre-release": (operation("talos", "v1.14.0-rc.1"), "is not a final release vX.Y.Z"),
    "shorthand-is-not-a-version": (operation("talos", "v1.14"), "expected the full form vX.Y.Z"),
    "not-newer": (operation("talos", "v1.13.1"), "choose one newer than v1.13.2"),
    "unknown-talos": (
        operation("talos", table.unknown_talos()),
        f"this Ichor knows Talos {table.KNOWN_TALOS}",
    ),
    "unknown-talos-in-machinerys-words": (
        operation("talos", table.unknown_talos()),
        f"Talos {table.unknown_talos()} is refused: upgrades to version "
        f"{table.unknown_talos(v=False)} are not supported (Talos machinery)",
    ),
    "talos-path": (
        operation("talos", "v1.14.3", cluster="old"),
        "Talos 1.14 installs over Talos 1.12.0",
    ),
    "kubernetes-skew": (operation("kubernetes", "v1.37.1"), "at most one minor at a time"),
    "kubernetes-pairing-with-talos": (
        operation("kubernetes", "v1.35.0", cluster="old"),
        "is refused with Talos v1.11.5: Talos 1.11 runs Kubernetes 1.29.0",
    ),
    # The CRD refuses a version on a cni operation before the webhook is asked.
    "cni-version": (operation("cni", "v1.20.5"), "a cni operation takes no version"),
    "cni-image-version": (
        operation("cni", cni={"imageVersion": "1.20.5"}),
        "delete it and run `ichor cni upgrade` again",
    ),
    "missing-cluster": (
        operation("talos", "v1.14.3", cluster="nope"),
        "does not exist",
    ),
}


@pytest.mark.parametrize(("body", "words"), REFUSALS.values(), ids=REFUSALS.keys())
def test_the_plan_refuses_by_the_target_rule(
    running: Api, body: dict[str, Any], words: str
) -> None:
    result = running.create(body, user=PLAIN, dry_run=True)
    assert result.returncode != 0
    assert "denied the request" in result.stderr or "Invalid value" in result.stderr
    assert words in result.stderr


@pytest.mark.parametrize(
    "body",
    [operation("talos", "v1.14.3"), operation("kubernetes", "v1.35.9"), operation("cni")],
    ids=["talos-next-minor", "kubernetes-patch", "cni-to-the-chart"],
)
def test_a_valid_target_is_accepted_without_warning(running: Api, body: dict[str, Any]) -> None:
    result = running.create(body, user=PLAIN, dry_run=True)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr


CILIUM_ORDER = "upgrade Cilium to 1.20.4 first"


@pytest.mark.parametrize(
    ("user", "override", "words"),
    [
        (PLAIN, False, "Setting `override: true` on the TalosOperation would pass"),
        (HOLDER, False, "Setting `override: true` on the TalosOperation would pass"),
        (PLAIN, True, f"user '{PLAIN}' does not hold the RBAC verb `override` on `talosclusters`"),
    ],
    ids=["without-override", "holder-without-override", "override-without-the-verb"],
)
def test_an_overridable_plan_refusal_needs_the_flag_and_the_verb(
    running: Api, user: str, override: bool, words: str
) -> None:
    body = operation("kubernetes", "v1.36.2", override=override)
    result = running.create(body, user=user, dry_run=True)
    assert result.returncode != 0
    assert CILIUM_ORDER in result.stderr
    assert words in result.stderr


def test_the_override_is_a_warning_on_the_dry_run_and_an_event_on_the_create(
    running: Api,
) -> None:
    body = operation("kubernetes", "v1.36.2", override=True)
    dry = running.create(body, user=HOLDER, dry_run=True)
    assert dry.returncode == 0, dry.stderr
    assert f"Warning: override by {HOLDER}" in dry.stderr
    assert running.override_events(CLUSTER) == []

    done = running.create(body, user=HOLDER)
    assert done.returncode == 0, done.stderr
    assert f"Warning: override by {HOLDER}" in done.stderr
    (event,) = running.override_events(CLUSTER)
    assert event["type"] == "Warning"
    assert f"User {HOLDER} overrode" in event["message"]
    assert "TalosOperation" in event["message"]
    assert CILIUM_ORDER in event["message"]


def test_an_unknown_version_is_refused_even_with_override_and_the_verb(running: Api) -> None:
    result = running.create(operation("talos", table.unknown_talos(), override=True), user=HOLDER)
    assert result.returncode != 0
    assert "never overridable" in result.stderr
    assert running.override_events(CLUSTER) == []


def test_an_unknown_cilium_behind_an_overridable_pair_is_refused_with_override_and_the_verb(
    api: Api,
) -> None:
    """The plan of the reproduction: Talos v1.14.3, Kubernetes v1.31.5, a Cilium no table
    knows; a Kubernetes v1.32.0 operation with override: true by a holder of the verb is
    refused."""
    created = api.create(
        harness.cluster_manifest("odd", api.namespace, kubernetes="v1.31.5"), user=None
    )
    assert created.returncode == 0, created.stderr
    api.set_cilium("odd", table.unknown_cilium())
    events = len(api.override_events("odd"))
    body = operation("kubernetes", "v1.32.0", override=True, cluster="odd")
    for dry_run in (True, False):
        result = api.create(body, user=HOLDER, dry_run=dry_run)
        assert result.returncode != 0, result.stdout
        assert f"Cilium {table.unknown_cilium()} is refused" in result.stderr
        assert "never overridable" in result.stderr
    assert len(api.override_events("odd")) == events
    listed = api.plane.kubectl("get", "talosoperations", "-n", api.namespace, "-o", "name")
    assert listed.stdout.strip() == ""


def test_a_cni_operation_for_an_unmanaged_cni_is_refused(api: Api) -> None:
    body = harness.cluster_manifest("own-cni", api.namespace)
    body["spec"]["cni"] = {"preset": "unmanaged"}
    assert api.create(body, user=None).returncode == 0
    api.set_cilium("own-cni", "1.19.10")
    result = api.create(operation("cni", cluster="own-cni", override=True), user=HOLDER)
    assert result.returncode != 0
    assert "spec.cni.preset is unmanaged" in result.stderr
    assert "never overridable" in result.stderr


@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
def test_override_on_a_plan_clean_at_creation_still_needs_the_verb(
    running: Api, dry_run: bool
) -> None:
    """The executor passes a refusal it meets at execution on ``override: true`` alone, so
    the flag needs the verb even when the plan refuses nothing."""
    body = operation("talos", "v1.14.3", override=True)
    clean = running.create(operation("talos", "v1.14.3"), user=PLAIN, dry_run=True)
    assert clean.returncode == 0, clean.stderr
    refused = running.create(body, user=PLAIN, dry_run=dry_run)
    assert refused.returncode != 0, refused.stdout
    assert f"user '{PLAIN}' does not hold the RBAC verb `override`" in refused.stderr
    assert "remove `override: true`" in refused.stderr
    passed = running.create(body, user=HOLDER, dry_run=True)
    assert passed.returncode == 0, passed.stderr
    assert f"override: true set by {HOLDER}" in passed.stderr
