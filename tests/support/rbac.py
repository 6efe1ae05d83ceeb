"""RBAC objects the component tests grant their users, written once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ichor.api import kinds

API_VERSION = "rbac.authorization.k8s.io/v1"


def cluster_role(name: str, rules: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": list(rules),
    }


def override_role(name: str) -> dict[str, Any]:
    """What docs/rules.md tells an admin to grant: the custom verb on talosclusters."""
    return cluster_role(
        name, [{"apiGroups": [kinds.GROUP], "resources": ["talosclusters"], "verbs": ["override"]}]
    )


def binding(role: str, users: Sequence[str]) -> dict[str, Any]:
    """A ClusterRoleBinding named after ``role``, for ``users``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
            for user in users
        ],
    }
