"""helm (built from its Go module by ``make testenv``) against the chart, for the tests.

``template`` renders the chart with given values and parses every object, so the tests
assert on fields rather than compare text. A missing helm fails the test with the make
target to run.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import binaries

CHART = Path(__file__).resolve().parents[3] / "charts" / "ichor"
RELEASE = "ichor"
NAMESPACE = "ichor-system"
KUBE_VERSION = "1.37.2"

Object = dict[str, Any]


def binary() -> Path:
    try:
        return binaries.find("helm")
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)


def run(
    *args: str, values: Mapping[str, Any] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS -f <values>``; the values go through a file, as a person would pass them."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        command = [str(binary()), *args]
        if values:
            json.dump(dict(values), file)
            file.flush()
            command += ["-f", file.name]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=180)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stderr}")
    return result


HOOK = "helm.sh/hook"


def rendered(
    values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE
) -> list[Object]:
    """Every object ``helm template`` renders, the hooks' too."""
    result = run(
        "template", RELEASE, str(CHART), "--namespace", namespace,
        "--kube-version", KUBE_VERSION, "--include-crds", values=values,
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def is_hook(item: Object) -> bool:
    """A hook Helm deletes once it succeeded (the CRD upgrade's Job and what it needs): not
    part of what the release leaves in the cluster. A hook that stays (the peering object
    of ``replicas`` > 1) is."""
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    return HOOK in annotations and "hook-succeeded" in annotations.get(
        "helm.sh/hook-delete-policy", ""
    )


def template(
    values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE
) -> list[Object]:
    """What the release leaves in the cluster: every object but the hooks Helm deletes
    once they succeeded, which are ``hooks``'."""
    return [item for item in rendered(values, namespace=namespace) if not is_hook(item)]


def hooks(values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE) -> list[Object]:
    return [item for item in rendered(values, namespace=namespace) if is_hook(item)]


def lint(values: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    return run("lint", "--strict", str(CHART), values=values, check=False)


def find(objects: Iterable[Object], kind: str, name: str | None = None) -> list[Object]:
    return [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objects: Iterable[Object], kind: str, name: str | None = None) -> Object:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def kinds(objects: Sequence[Object]) -> set[str]:
    return {o["kind"] for o in objects}


def container(objects: Sequence[Object]) -> Object:
    deployment = one(objects, "Deployment")
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    found: Object = operator
    return found


def env(
    objects: Sequence[Object], *, pod: str = "ichor-6d4cf56db6-tx8lp", namespace: str = NAMESPACE
) -> dict[str, str]:
    """The operator container's environment, with the Pod's fields (``valueFrom.fieldRef``)
    filled in as a kubelet would for the Pod ``pod`` in ``namespace``; any other source fails
    the test that reads it, naming it."""
    fields = {"metadata.name": pod, "metadata.namespace": namespace}
    resolved: dict[str, str] = {}
    for entry in container(objects).get("env", []):
        if "valueFrom" not in entry:
            resolved[entry["name"]] = entry.get("value", "")
            continue
        path = entry["valueFrom"].get("fieldRef", {}).get("fieldPath")
        assert path in fields, f"env {entry['name']}: cannot fill in {entry['valueFrom']}"
        resolved[entry["name"]] = fields[path]
    return resolved


def env_sources(objects: Sequence[Object]) -> dict[str, Object]:
    """Each variable of the operator container as the chart writes it (``value`` or
    ``valueFrom``)."""
    entries = container(objects)["env"]
    return {e["name"]: {k: v for k, v in e.items() if k != "name"} for e in entries}
