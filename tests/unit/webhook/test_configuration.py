"""The fixed webhook configurations, as the chart and the tests install them."""

from __future__ import annotations

import base64

from ichor.webhook import configuration, intake


def test_the_configuration_fails_closed_within_five_seconds_for_our_group_only() -> None:
    config = configuration.render_configuration(url="https://127.0.0.1:9443/", ca_bundle=b"PEM")
    assert config["kind"] == "ValidatingWebhookConfiguration"
    hooks = {hook["name"]: hook for hook in config["webhooks"]}
    assert set(hooks) == {
        "taloscluster.ichor.dev",
        "talosoperation.ichor.dev",
        "taloscluster-status.ichor.dev",
        "talosoperation-status.ichor.dev",
        "ichorinstallation-status.ichor.dev",
        # the installation's update: the operator's marks and the unhalt request's record
        "ichorinstallation.ichor.dev",
    }
    installation = hooks["ichorinstallation.ichor.dev"]["rules"][0]
    # never its create: the chart makes it in the same release, before the webhook answers
    assert installation["operations"] == ["UPDATE"]
    assert (installation["resources"], installation["scope"]) == (["ichorinstallations"], "Cluster")
    # and only an update that carries an ichor.dev key or writes spec.policy (not the
    # chart's own label updates)
    assert hooks["ichorinstallation.ichor.dev"]["matchConditions"] == [
        {"name": "ichor-dev-keys", "expression": intake.INSTALLATION_WRITES}
    ]
    assert intake.INSTALLATION_WRITES.startswith(f"{intake.RESERVED_KEYS} || ")
    assert all("matchConditions" not in h for n, h in hooks.items() if "installation." not in n)
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["timeoutSeconds"] <= 5
        assert hook["admissionReviewVersions"] == ["v1"]
        assert all(rule["apiGroups"] == ["ichor.dev"] for rule in hook["rules"])
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"PEM"
    cluster, operation = hooks["taloscluster.ichor.dev"], hooks["talosoperation.ichor.dev"]
    assert cluster["clientConfig"]["url"] == "https://127.0.0.1:9443/taloscluster"
    assert cluster["rules"][0]["resources"] == ["talosclusters"]
    assert cluster["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert operation["rules"][0]["resources"] == ["talosoperations"]
    # UPDATE too: an operation's spec never changes, and its admission stamp must not either
    assert operation["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    # status is the operator's: every kind's status subresource, cluster-scoped one included
    for plural, scope in (
        ("talosclusters", "Namespaced"),
        ("talosoperations", "Namespaced"),
        ("ichorinstallations", "Cluster"),
    ):
        status = hooks[f"{plural[:-1]}-status.ichor.dev"]
        assert status["clientConfig"]["url"] == f"https://127.0.0.1:9443/{plural[:-1]}-status"
        assert status["rules"][0]["resources"] == [f"{plural}/status"]
        assert status["rules"][0]["operations"] == ["UPDATE"]
        assert status["rules"][0]["scope"] == scope
