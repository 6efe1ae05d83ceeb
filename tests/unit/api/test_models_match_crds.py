"""The typed models and the CRD schemas name the same fields.

A field the model has and the schema lacks would be pruned by the API server on write; a
field the schema has and the model lacks would be dropped on read. Both are silent, so
this test walks every object of both and compares the names, and the required ones.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from ichor.api import kinds
from ichor.api.conditions import Condition
from ichor.api.ichorinstallation import IchorInstallationSpec, IchorInstallationStatus
from ichor.api.taloscluster import TalosClusterSpec, TalosClusterStatus
from ichor.api.talosoperation import TalosOperationSpec, TalosOperationStatus

CRDS = Path(__file__).resolve().parents[3] / "crds"

MODELS: list[tuple[kinds.Kind, str, type[BaseModel]]] = [
    (kinds.Kind.TALOS_CLUSTER, "spec", TalosClusterSpec),
    (kinds.Kind.TALOS_CLUSTER, "status", TalosClusterStatus),
    (kinds.Kind.ICHOR_INSTALLATION, "spec", IchorInstallationSpec),
    (kinds.Kind.ICHOR_INSTALLATION, "status", IchorInstallationStatus),
    (kinds.Kind.TALOS_OPERATION, "spec", TalosOperationSpec),
    (kinds.Kind.TALOS_OPERATION, "status", TalosOperationStatus),
]


def _crd(kind: kinds.Kind) -> dict[str, Any]:
    path = CRDS / f"{kinds.crd_name(kind)}.yaml"
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _root_schema(kind: kinds.Kind) -> dict[str, Any]:
    (version,) = _crd(kind)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _nested_model(annotation: Any) -> tuple[type[BaseModel], str | None] | None:
    """The model inside ``annotation`` (through ``| None``, ``tuple[M, ...]`` and
    ``dict[str, M]``), and where it sits: None, ``array`` or ``map``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            found = _nested_model(arg)
            if found:
                return found
    if origin in (tuple, list) and args:
        inner = _nested_model(args[0])
        if inner:
            return inner[0], "array"
    if origin is dict and len(args) == 2:
        inner = _nested_model(args[1])
        if inner:
            return inner[0], "map"
    return None


def _mismatches(model: type[BaseModel], schema: dict[str, Any], where: str) -> list[str]:
    assert schema.get("type") == "object", f"{where} is not an object in the CRD"
    properties: dict[str, Any] = schema.get("properties", {})
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    problems = [f"{where}.{n} is in the model only" for n in sorted(fields.keys() - properties)]
    problems += [f"{where}.{n} is in the CRD only" for n in sorted(properties.keys() - fields)]
    required = set(schema.get("required", ()))
    model_required = {alias for alias, info in fields.items() if info.is_required()}
    if required != model_required:
        problems.append(f"{where}: CRD requires {sorted(required)}, model {sorted(model_required)}")
    for alias, info in fields.items():
        nested = _nested_model(info.annotation)
        if nested is None or alias not in properties:
            continue
        inner, container = nested
        sub = properties[alias]
        if container == "array":
            assert sub.get("type") == "array", f"{where}.{alias} is not an array in the CRD"
            sub = sub["items"]
        elif container == "map":
            assert sub.get("type") == "object", f"{where}.{alias} is not a map in the CRD"
            sub = sub["additionalProperties"]
        problems += _mismatches(inner, sub, f"{where}.{alias}")
    return problems


@pytest.mark.parametrize(("kind", "part", "model"), MODELS, ids=[f"{k}.{p}" for k, p, _ in MODELS])
def test_model_and_crd_name_the_same_fields(
    kind: kinds.Kind, part: str, model: type[BaseModel]
) -> None:
    schema = _root_schema(kind)["properties"][part]
    assert _mismatches(model, schema, part) == []


@pytest.mark.parametrize("kind", list(kinds.Kind))
def test_crd_names_match_the_constants(kind: kinds.Kind) -> None:
    crd = _crd(kind)
    assert crd["metadata"]["name"] == kinds.crd_name(kind)
    assert crd["spec"]["group"] == kinds.GROUP
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["plural"] == kinds.PLURALS[kind]
    assert kinds.CATEGORY in crd["spec"]["names"]["categories"]
    assert crd["spec"]["scope"] == ("Namespaced" if kinds.NAMESPACED[kind] else "Cluster")
    (version,) = crd["spec"]["versions"]
    assert version["name"] == kinds.VERSION
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", list(kinds.Kind))
def test_conditions_have_the_metav1_shape(kind: kinds.Kind) -> None:
    conditions = _root_schema(kind)["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert _mismatches(Condition, conditions["items"], "conditions[]") == []


def test_model_dump_uses_the_api_names_and_omits_absent_fields() -> None:
    spec = TalosClusterSpec.model_validate(
        {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}
    )
    assert spec.to_api() == {
        "talosVersion": "v1.14.3",
        "kubernetesVersion": "v1.36.6",
        "versionContract": "v1.14",
        "cni": {"preset": "cilium"},
        "upgradeStrategy": "Operations",  # the CRD's default, as cni's
    }
