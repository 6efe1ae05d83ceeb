"""A write of the site's policy (IchorInstallation ``spec.policy``) against the real API
server: its schema holds refusals only (a forged field is rejected, or pruned so that it
allows nothing), the webhook refuses a policy it cannot read or whose entry claims to
allow what the table refuses, and the installation's match condition sends every write
of the policy to the webhook while a chart upgrade (labels, release check) never waits
for it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ichor.api import kinds
from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER
from tests.harness import account, controlplane
from tests.support import table

pytestmark = pytest.mark.component

ON = ["ichorinstallation", kinds.INSTALLATION_NAME]


@pytest.fixture
def installation(control_plane: controlplane.ControlPlane) -> Iterator[None]:
    """The singleton, without a policy when the test ends."""
    found = control_plane.kubectl("get", *ON, check=False)
    if found.returncode != 0:
        body = {"apiVersion": kinds.API_VERSION, "kind": "IchorInstallation",
                "metadata": {"name": kinds.INSTALLATION_NAME},
                "spec": {"releaseCheck": {"enabled": False}}}  # fmt: skip
        control_plane.kubectl("create", "-f", "-", input=json.dumps(body))
    try:
        yield
    finally:
        control_plane.kubectl(
            "patch", *ON, "--type=merge", "-p", json.dumps({"spec": {"policy": None}}),
            check=False,
        )  # fmt: skip


def patch(plane: controlplane.ControlPlane, policy: object, *extra: str) -> Any:
    return plane.kubectl(
        "patch", *ON, "--type=merge", *extra, "-p", json.dumps({"spec": {"policy": policy}}),
        check=False,
    )  # fmt: skip


def replace(plane: controlplane.ControlPlane, policy: object, validate: str) -> Any:
    """The whole object written back with ``policy``, under ``--validate`` (kubectl patch
    has no such flag)."""
    body = json.loads(plane.kubectl("get", *ON, "-o", "json").stdout)
    body["spec"]["policy"] = policy
    return plane.kubectl(
        "replace", f"--validate={validate}", "-f", "-", input=json.dumps(body), check=False
    )


def stored(plane: controlplane.ControlPlane) -> Any:
    body = json.loads(plane.kubectl("get", *ON, "-o", "json").stdout)
    return body["spec"].get("policy")


def entry(**fields: Any) -> dict[str, Any]:
    base = {"name": "x", "component": "talos", "versions": ["v1.14.4"], "reason": "why"}
    base.update(fields)
    return base


def test_a_forged_entry_is_rejected_by_the_schema_or_pruned_so_it_allows_nothing(
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    users: None,
    installation: None,
) -> None:
    unknown = table.unknown_talos()
    forged = {
        "deny": [entry(name="let-it-in", versions=[unknown], allow=True, effect="Allow")],
        "allow": [{"component": "talos", "versions": [unknown]}],
    }
    strict = replace(control_plane, forged, "strict")
    assert strict.returncode != 0
    assert 'unknown field "spec.policy.allow"' in strict.stderr, strict.stderr
    assert stored(control_plane) is None
    # sent with a warning (kubectl patch's way) or no field validation at all, the API
    # server prunes what the schema does not hold: what is stored is a refusal, only that
    sends: list[Callable[[], Any]] = [
        lambda: patch(control_plane, forged),
        lambda: replace(control_plane, forged, "false"),
    ]
    for send in sends:
        sent = send()
        assert sent.returncode == 0, sent.stderr
        assert stored(control_plane) == {"deny": [entry(name="let-it-in", versions=[unknown])]}
        patch(control_plane, None)
    warned = patch(control_plane, forged)
    assert 'unknown field "spec.policy.deny[0].effect"' in warned.stderr
    # and the version it named stays unknown: refused, for a holder of the verb too
    cluster = harness.cluster_manifest("forged", "default", talos=unknown)
    refused = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(cluster), as_user=HOLDER,
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "no override passes an unknown version" in refused.stderr


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        (
            {
                "highestMinor": [
                    {
                        "name": "h",
                        "component": "kubernetes",
                        "reason": "r",
                        "minor": table.unknown_kubernetes(v=False).rsplit(".", 1)[0],
                    }
                ]
            },
            "would claim to allow what the table refuses",
        ),
        (
            {"deny": [entry(versions=None, range={"from": "v1.14.9", "to": "v1.14.1"})]},
            "holds nothing",
        ),
        (
            {"deny": [entry(**{"with": {"component": "talos", "versions": ["v1.14.3"]}})]},
            "names the entry's own component",
        ),
    ],
    ids=["a-highest-minor-past-the-table", "an-empty-range", "a-pair-with-itself"],
)
def test_the_webhook_refuses_a_policy_it_cannot_read(
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    installation: None,
    policy: dict[str, Any],
    words: str,
) -> None:
    result = patch(control_plane, json.loads(json.dumps(policy, default=str)))
    assert result.returncode != 0
    assert "its site policy (spec.policy) cannot be read" in result.stderr, result.stderr
    assert words in result.stderr
    assert stored(control_plane) is None


def test_the_schema_refuses_an_entry_without_its_reason_or_a_second_entry_of_one_name(
    control_plane: controlplane.ControlPlane, webhook: harness.Webhook, installation: None
) -> None:
    no_reason = entry()
    del no_reason["reason"]
    assert patch(control_plane, {"deny": [no_reason]}).returncode != 0
    twice = {
        "deny": [entry()],
        "highestMinor": [{"name": "x", "component": "kubernetes", "minor": "1.36", "reason": "r"}],
    }
    result = patch(control_plane, twice)
    assert result.returncode != 0
    assert "each entry of spec.policy has a name of its own" in result.stderr
    assert patch(control_plane, {"deny": [entry()]}).returncode == 0


def test_a_policy_write_waits_for_the_webhook_and_a_chart_upgrade_does_not(
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    tmp_path: Path,
    operator_account: account.Account,
    installation: None,
) -> None:
    """With a second configuration whose server is down: the chart's own updates of the
    installation (its labels, its release check settings) pass, since the match condition
    sends none of them; a write that adds, changes or removes the policy waits for the
    webhook and is refused while it is down."""
    assert patch(control_plane, {"deny": [entry()]}).returncode == 0
    down = harness.Webhook(control_plane, tmp_path, operator_account)
    try:
        down.start()
        down.stop_server()
        chart = control_plane.kubectl("label", "--overwrite", *ON, "helm.sh/chart=ichor-9.9.9")
        assert chart.returncode == 0
        release_check = control_plane.kubectl(
            "patch", *ON, "--type=merge",
            "-p", json.dumps({"spec": {"releaseCheck": {"interval": "7h"}}}),
        )  # fmt: skip
        assert release_check.returncode == 0
        for policy in ({"deny": [entry(versions=["v1.14.5"])]}, None):
            waited = patch(control_plane, policy)
            assert waited.returncode != 0
            assert "failed calling webhook" in waited.stderr
            assert f"127.0.0.1:{down.port}/" in waited.stderr
        assert stored(control_plane) == {"deny": [entry()]}
    finally:
        down.close()
        control_plane.kubectl("label", *ON, "helm.sh/chart-", check=False)
        control_plane.kubectl(
            "patch", *ON, "--type=merge",
            "-p", json.dumps({"spec": {"releaseCheck": {"interval": "6h"}}}), check=False,
        )  # fmt: skip
