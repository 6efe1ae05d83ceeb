"""The operator's identity for the tests and the demo: the chart's ServiceAccount and role.

Whatever runs the operator here (the component tests, ``make demo``) runs it as the
account the chart gives it, with exactly the chart's ClusterRole (rendered by ``helm
template``, so a rule the chart lacks fails here as it would in a cluster), never as the
admin: an operator run as ``system:masters`` holds every verb, ``override`` included,
and would hide what the chart's permissions do not allow.

There is no token controller on the local control plane, so the account reaches the API
server with a client certificate naming ``system:serviceaccount:<namespace>:<name>`` and
the ServiceAccount groups, which the API server reads exactly as that ServiceAccount. A
test or the demo that plays what only the operator writes (a status it would have
observed) writes it as this account too (``kubectl_as``): the webhook lets no one else
write status.
"""

from __future__ import annotations

import functools
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.harness import binaries, certs, checkout, controlplane

CHART = checkout.CHART
#: The chart's release name (its ClusterRole is named after it).
RELEASE = "ichor"
NAMESPACE = "ichor-system"
NAME = "ichor"


@dataclass(frozen=True)
class Account:
    username: str
    groups: tuple[str, ...]
    cert: Path
    key: Path
    kubeconfig: Path

    def kubectl_as(self) -> list[str]:
        """kubectl flags for the admin to act as this account."""
        flags = ["--as", self.username]
        for group in self.groups:
            flags += ["--as-group", group]
        return flags

    def patch_status(
        self,
        *,
        server: str,
        ca_file: Path,
        plural: str,
        name: str,
        namespace: str | None,
        status: dict[str, Any],
    ) -> dict[str, Any]:
        """Merge ``status`` into an ichor.dev object's status as this account, the way the
        operator writes it (one PATCH; ``kubectl patch`` would first GET the status, a
        verb the chart does not grant). Raises ``RuntimeError`` with the API's answer."""
        where = f"namespaces/{namespace}/" if namespace else ""
        url = f"{server}/apis/ichor.dev/v1alpha1/{where}{plural}/{name}/status"
        request = urllib.request.Request(
            url,
            data=json.dumps({"status": status}).encode(),
            method="PATCH",
            headers={"Content-Type": "application/merge-patch+json"},
        )
        context = ssl.create_default_context(cafile=str(ca_file))
        context.load_cert_chain(str(self.cert), str(self.key))
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                written: dict[str, Any] = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise RuntimeError(
                f"status of {plural}/{name} not written as {self.username}: "
                f"{error.code} {error.read().decode(errors='replace')}"
            ) from None
        return written


def username(*, namespace: str = NAMESPACE, name: str = NAME) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def groups(*, namespace: str = NAMESPACE) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def chart_rules(*, chart: Path = CHART) -> list[dict[str, Any]]:
    """The rules of the chart's operator ClusterRole with the default values."""
    return _chart_role(chart, RELEASE)


#: The ClusterRole the chart ships for a tenant's account to read its cluster with (a
#: TalosCluster without a kubeconfig Secret is read as a ServiceAccount of its namespace).
TENANT_READER = "ichor-tenant-reader"


def tenant_reader_rules(*, chart: Path = CHART) -> list[dict[str, Any]]:
    """The rules of the chart's ``ichor-tenant-reader`` ClusterRole."""
    return _chart_role(chart, TENANT_READER)


@functools.cache
def _chart_role(chart: Path, name: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(binaries.find("helm")), "template", RELEASE, str(chart), "--namespace", NAMESPACE,
         "--show-only", "templates/rbac.yaml"],
        capture_output=True, text=True, timeout=180, check=False,
        env=controlplane.loopback_env(),
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"helm template of {chart} failed: {result.stderr}")
    for doc in yaml.safe_load_all(result.stdout):
        if doc and doc.get("kind") == "ClusterRole" and doc["metadata"]["name"] == name:
            rules: list[dict[str, Any]] = doc["rules"]
            return rules
    raise RuntimeError(f"the chart {chart} renders no ClusterRole {name}")


def bind_tenant_reader(
    plane: controlplane.ControlPlane, *, namespace: str, name: str = "default"
) -> str:
    """The chart's ``ichor-tenant-reader`` bound to ServiceAccount ``namespace/name``, as a
    platform admin binds it for a TalosCluster without a kubeconfig Secret; the binding's
    name, for ``unbind``. The ClusterRole is applied as the chart renders it."""
    binding = f"{TENANT_READER}-{namespace}-{name}"[:253]
    documents = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": TENANT_READER},
            "rules": tenant_reader_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": TENANT_READER,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
    plane.kubectl(
        "apply", "-f", "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}),
    )  # fmt: skip
    return binding


def unbind(plane: controlplane.ControlPlane, binding: str) -> None:
    plane.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found", check=False)


def manifests(
    rules: Sequence[dict[str, Any]], *, role: str, namespace: str = NAMESPACE, name: str = NAME
) -> list[dict[str, Any]]:
    """A ClusterRole ``role`` with ``rules``, bound to the ServiceAccount."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": list(rules),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def issue(
    authority: certs.Authority,
    *,
    server: str,
    directory: Path,
    namespace: str = NAMESPACE,
    name: str = NAME,
) -> Account:
    """The account's client certificate, key and kubeconfig, written into ``directory``."""
    user = username(namespace=namespace, name=name)
    member = groups(namespace=namespace)
    pem = authority.issue_client(user=user, groups=member)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(pem.cert)
    key.write_bytes(pem.key)
    key.chmod(0o600)
    kubeconfig = controlplane.write_kubeconfig(
        directory / f"{name}.kubeconfig",
        server=server,
        ca_pem=authority.cert_pem,
        user=user,
        client=pem,
    )
    return Account(username=user, groups=member, cert=cert, key=key, kubeconfig=kubeconfig)


def grant(
    plane: controlplane.ControlPlane, *, role: str, directory: Path, namespace: str = NAMESPACE
) -> Account:
    """Apply the chart's ClusterRole as ``role`` for the account (idempotent); its files."""
    documents = manifests(chart_rules(), role=role, namespace=namespace)
    plane.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}),
    )
    return issue(plane.authority, server=plane.server, directory=directory, namespace=namespace)
