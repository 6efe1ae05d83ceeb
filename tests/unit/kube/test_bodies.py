"""The bodies a controller keeps in memory: everything but server-side apply's bookkeeping."""

from __future__ import annotations

from ichor.kube.bodies import without_managed_fields


def test_managed_fields_are_dropped_and_nothing_else() -> None:
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "resourceVersion": "7",
            "generation": 2,
            "managedFields": [{"manager": "ichor-operator", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"talosVersion": "v1.14.3"},
        "status": {"observedGeneration": 2},
    }
    kept = without_managed_fields(body)
    assert kept["metadata"] == {
        "name": "c",
        "namespace": "ns",
        "resourceVersion": "7",
        "generation": 2,
    }
    assert {k: v for k, v in kept.items() if k != "metadata"} == {
        k: v for k, v in body.items() if k != "metadata"
    }
    assert "managedFields" in body["metadata"]  # the body it was given is left as it was


def test_a_body_without_them_is_itself() -> None:
    body = {"metadata": {"name": "c"}, "spec": {}}
    assert without_managed_fields(body) is body
    assert without_managed_fields({}) == {}
    assert without_managed_fields({"metadata": None}) == {"metadata": None}
