"""A throwaway custom resource for the control-plane tests.

The tests prove the API server itself (schemas, status subresource, webhooks), so they
use a kind of their own rather than Ichor's CRDs, whose shape changes for other reasons.
Each test module passes its own group, so webhooks and objects never cross modules.
"""

from __future__ import annotations

import json
from typing import Any

from tests.harness import controlplane

VERSION = "v1"
KIND = "Widget"
PLURAL = "widgets"
SIZES = ("small", "large", "huge")


def widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "plural": PLURAL,
                "singular": "widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {
                                        "size": {"type": "string", "enum": list(SIZES)},
                                        "replicas": {
                                            "type": "integer",
                                            "minimum": 0,
                                            "maximum": 10,
                                        },
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {
                                        "phase": {"type": "string"},
                                        "observedGeneration": {"type": "integer"},
                                    },
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def widget(*, group: str, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def install(plane: controlplane.ControlPlane, group: str) -> str:
    """Apply the CRD for ``group`` and wait until it is served; return its resource name."""
    crd = widget_crd(group)
    plane.kubectl("apply", "-f", "-", input=json.dumps(crd))
    name: str = crd["metadata"]["name"]
    plane.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s")
    return name
