"""TalosCluster AdmissionReviews for comparing two webhooks: a grid, edge cases, garbage.

``review(...)`` builds one AdmissionReview (admission.k8s.io/v1) as the API server sends
it; ``corpus()`` is the fixed set the differential test sends to Ichor's decision
function and to the Go webhook of tests/gotools: every Talos minor the table knows and
some it does not, against every Kubernetes minor around the table's, the bounds of each
machinery row (``1.X.99`` is exclusive), pre-releases, the Cilium half (managed or not,
every Cilium minor of the table and an unknown one, versions padded or unreadable),
updates that move one field, both, none or go back, and objects the webhooks cannot read.
Deterministic: the same list every run, so a failure is reproducible by its index.
"""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

__all__ = [
    "CILIUM",
    "DETECTED",
    "FORMLESS",
    "KUBERNETES",
    "PRESETS",
    "TALOS",
    "cluster",
    "corpus",
    "review",
]

TALOS = [f"v1.{m}.0" for m in range(0, 17)] + [
    "v1.14.3",
    "v1.13.9",
    "v1.14.0-beta.1",
    "v1.14.3+build.5",
    "v2.14.0",
    "v0.14.0",
]
KUBERNETES = [f"v1.{m}.0" for m in range(21, 40)] + [
    "v1.37.98",
    "v1.37.99",
    "v1.36.99",
    "v1.31.99",
    "v1.32.0-rc.0",
    "v1.30.5",
    "v2.36.0",
]
CILIUM = [
    "1.18.16",
    "1.19.10",
    "1.20.4",
    "v1.20.4",
    " 1.20.4 ",
    "1.21.0",
    "1.17.0",
    "x",
    "",
    "\x1c1.19.1",
]
DETECTED = ["cilium", "Cilium", " CILIUM ", "calico", "", None]
PRESETS = ["cilium", "none", "", None]
#: Not versions, or not in the full form a spec field needs.
FORMLESS = ["1.14.3", "v1.14", "v01.14.3", "v1.14.3 ", "garbage", "", "v1.14.18446744073709551616"]


def cluster(
    *,
    talos: Any = "v1.14.3",
    kubernetes: Any = "v1.36.6",
    contract: Any = "v1.14",
    cilium: Any = None,
    detected: Any = "cilium",
    preset: Any = None,
    name: str = "prod",
    namespace: str = "team-a",
) -> dict[str, Any]:
    """A TalosCluster body; ``cilium`` set adds the status the operator writes."""
    spec: dict[str, Any] = {
        "talosVersion": talos,
        "kubernetesVersion": kubernetes,
        "versionContract": contract,
    }
    if preset is not None:
        spec["cni"] = {"preset": preset}
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1", "generation": 1},
        "spec": spec,
    }
    if cilium is not None:
        body["status"] = {"cni": {"detected": detected, "detectedVersion": cilium}}
    return body


def review(
    new: Any,
    old: Any = None,
    *,
    operation: str | None = None,
    username: str = "alice",
    dry_run: bool = False,
) -> dict[str, Any]:
    """An AdmissionReview of a TalosCluster write (UPDATE when ``old`` is given)."""
    op = operation or ("UPDATE" if old is not None else "CREATE")
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
        "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
        "requestKind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
        "requestResource": {
            "group": "ichor.dev",
            "version": "v1alpha1",
            "resource": "talosclusters",
        },
        "name": "prod",
        "namespace": "team-a",
        "operation": op,
        "userInfo": {"username": username, "uid": "u-1", "groups": ["ops"]},
        "object": new,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{op.title()}Options"},
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _creates() -> list[dict[str, Any]]:
    out = [review(cluster(talos=t, kubernetes=k)) for t, k in itertools.product(TALOS, KUBERNETES)]
    out += [review(cluster(talos=t)) for t in FORMLESS]
    out += [review(cluster(kubernetes=k)) for k in FORMLESS]
    out += [
        review(cluster(contract=c))
        for c in ["v1.14", "1.14", "v1.14.0", "v01.14", "v1.99999999999999999999", ""]
    ]
    return out


def _cilium(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for _ in range(1500):
        body = cluster(
            talos=rng.choice(["v1.14.3", "v1.13.9", "v1.12.0", "v1.11.2"]),
            kubernetes=rng.choice(KUBERNETES[10:]),
            cilium=rng.choice(CILIUM),
            detected=rng.choice(DETECTED),
            preset=rng.choice(PRESETS),
        )
        if rng.random() < 0.5:
            out.append(review(body))
        else:
            old = cluster(
                talos=body["spec"]["talosVersion"],
                kubernetes=rng.choice(
                    ["v1.33.0", "v1.35.2", "v1.36.6", body["spec"]["kubernetesVersion"]]
                ),
                cilium=body.get("status", {}).get("cni", {}).get("detectedVersion"),
                detected=rng.choice(DETECTED),
                preset=rng.choice(PRESETS),
            )
            out.append(review(body, old))
    return out


def _updates(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    versions = TALOS[10:] + FORMLESS
    kube = KUBERNETES[8:] + FORMLESS
    contracts = ["v1.13", "v1.14", "v1.15", "1.14", "v1.14.0"]
    for _ in range(1500):
        old = cluster(
            talos=rng.choice(versions), kubernetes=rng.choice(kube), contract=rng.choice(contracts)
        )
        new = cluster(
            talos=rng.choice([old["spec"]["talosVersion"], rng.choice(versions)]),
            kubernetes=rng.choice([old["spec"]["kubernetesVersion"], rng.choice(kube)]),
            contract=rng.choice([old["spec"]["versionContract"], rng.choice(contracts)]),
        )
        out.append(review(new, old))
    # Nothing moves (a label, say): no rule is asked, whatever the stored pair.
    out.append(
        review(
            cluster(talos="v1.14.3", kubernetes="v1.30.0"),
            cluster(talos="v1.14.3", kubernetes="v1.30.0"),
        )
    )
    out.append(review(cluster(talos="v1.15.0"), cluster(talos="v1.15.0")))
    return out


def _unreadable() -> list[dict[str, Any]]:
    good = cluster()
    no_spec = {k: v for k, v in good.items() if k != "spec"}
    no_meta = {k: v for k, v in good.items() if k != "metadata"}
    bodies: list[Any] = [
        None,
        "a string",
        [good],
        no_spec,
        no_meta,
        {**good, "spec": {**good["spec"], "talosVersion": 1.14}},
        {**good, "spec": {**good["spec"], "kubernetesVersion": None}},
        {**good, "spec": {**good["spec"], "versionContract": ["v1.14"]}},
        {**good, "spec": {**good["spec"], "cni": []}},  # empty: no CNI settings, readable
        {**good, "spec": {**good["spec"], "cni": 0}},  # likewise
        {**good, "spec": {**good["spec"], "cni": [1]}},
        {**good, "spec": {**good["spec"], "cni": {"preset": 5}}},
        {**good, "status": "oops"},
        {**good, "status": False},  # empty
        {**good, "status": {"cni": {"detected": "cilium", "detectedVersion": 1.2}}},
        {**good, "metadata": {"name": 5}},
        {**good, "metadata": {"name": "", "generateName": 5}},
        {**good, "metadata": {"name": "x", "generateName": 5}},  # not read when named
        {**good, "metadata": {}},
    ]
    out = [review(body) for body in bodies]
    out += [review(good, body) for body in bodies]
    out += [
        review(good, operation="DELETE"),
        review(good, operation="CONNECT"),
        review(good, operation="UPDATE"),  # no oldObject
        review(good, username=""),
    ]
    return out


def corpus() -> list[dict[str, Any]]:
    rng = random.Random(20261203)
    return _creates() + _cilium(rng) + _updates(rng) + _unreadable()
