"""What a workload cluster reports is read as data: a Node or a DaemonSet with a value no
rule can read gives its documented condition, and the status never keeps a stale
``Ready=True`` (the real API server stores these values as they are)."""

from __future__ import annotations

import pytest

from tests.component.controller.conftest import Objects, Operator, Workload, condition, eventually

pytestmark = pytest.mark.component

HUGE = "v1." + "9" * 5_000 + ".0"


async def test_a_kubelet_version_past_pythons_digit_limit_makes_the_node_unreadable(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await workload.add_node("cp-0", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_node("cp-1", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.create_cluster("prod")
    await eventually(
        lambda: objects.cluster("prod"),
        lambda b: condition(b, "Ready").get("status") == "True",
        what="Ready=True first",
    )

    await workload.set_node("cp-0", os_image="Talos (v1.14.3)", kubelet=HUGE)
    body = await eventually(
        lambda: objects.cluster("prod"),
        lambda b: condition(b, "Ready").get("reason") == "NodeVersionUnreadable",
        what="Ready=False NodeVersionUnreadable",
    )
    ready = condition(body, "Ready")
    assert ready["status"] == "False"
    assert "Node cp-0 reports kubeletVersion" in ready["message"]
    assert "(5,005 characters)" in ready["message"]
    assert len(ready["message"]) < 300  # the value is cut, not copied into the status
    assert operator.kopf.alive


async def test_an_image_tag_or_os_image_no_rule_can_read_gives_its_condition(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await workload.add_node("cp-0", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_daemonset("cilium", image=f"quay.io/cilium/cilium:{HUGE}")
    await objects.create_cluster("odd")
    body = await eventually(
        lambda: objects.cluster("odd"),
        lambda b: condition(b, "CiliumUpgradeAvailable").get("reason") == "CiliumVersionUnreadable",
        what="CiliumVersionUnreadable",
    )
    assert condition(body, "Ready")["status"] == "True"  # the Nodes themselves read fine

    await workload.set_node("cp-0", os_image=f"Talos ({HUGE})", kubelet="v1.36.6")
    body = await eventually(
        lambda: objects.cluster("odd"),
        lambda b: condition(b, "Ready").get("reason") == "NodeVersionUnreadable",
        what="NodeVersionUnreadable for the osImage",
    )
    assert 'Node cp-0 runs osImage "Talos (v1.9999' in condition(body, "Ready")["message"]
    assert operator.kopf.alive


async def test_an_error_no_reader_expected_is_a_condition_not_a_stale_ready(
    operator: Operator, workload: Workload, objects: Objects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever breaks while observing (here: the observer itself raises), the status
    says the Nodes' versions are not known; the last ``Ready=True`` does not stand."""
    from ichor.controller.taloscluster import reconciler

    await workload.add_node("cp-0", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.create_cluster("broken")
    await eventually(
        lambda: objects.cluster("broken"),
        lambda b: condition(b, "Ready").get("status") == "True",
        what="Ready=True first",
    )

    async def breaks(_: object) -> object:
        raise LookupError("a reader nobody wrote")

    monkeypatch.setattr(reconciler, "observe", breaks)
    body = await eventually(
        lambda: objects.cluster("broken"),
        lambda b: condition(b, "Ready").get("reason") == "NodeVersionUnreadable",
        what="Ready=False NodeVersionUnreadable",
    )
    ready = condition(body, "Ready")
    assert ready["status"] == "False"
    # named by its kind only: an exception's text may quote what the workload answered
    assert "(LookupError)" in ready["message"]
    assert "a reader nobody wrote" not in ready["message"]
    assert operator.kopf.alive
