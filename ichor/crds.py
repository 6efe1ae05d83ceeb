"""The chart's CRD upgrade: apply the CRDs the chart carries before the new operator runs.

``helm upgrade`` never changes a chart's CRDs, so the chart runs this module as a
pre-install and pre-upgrade hook Job (``python -m ichor.crds --chart-version V DIR``), as
an account that may only ``get`` and ``patch`` Ichor's three CRDs. Each is applied
server-side and waited for until Established. It never creates a CRD, applies a file that
is not Ichor's, or moves a CRD back (``ichor.dev/chart-version`` names who applied it).

More in docs/design/notes.md, "ichor/crds.py".
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.kube import errors
from ichor.kube.clients import REQUEST_TIMEOUT, operator_client
from ichor.release.versions import Version, VersionError, parse
from ichor.settings import KubeSettings

#: The annotation naming the chart version that applied a CRD.
CHART_VERSION = "ichor.dev/chart-version"
#: The field manager of the apply (``kubectl get crd -o yaml --show-managed-fields``).
FIELD_MANAGER = "ichor-crds"
APPLY_PATCH = "application/apply-patch+yaml"
ESTABLISHED_SECONDS = 60.0
NAMES = frozenset(kinds.crd_name(kind) for kind in kinds.Kind)
#: libyaml's safe loader when PyYAML has it (the CRDs are 50 KB of YAML).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Refused(Exception):
    """What the Job will not do, in one sentence with the step to take."""


@dataclass(frozen=True)
class Outcome:
    name: str
    applied: bool
    said: str


def read(directory: Path) -> list[dict[str, Any]]:
    """Ichor's CRDs from ``directory``, one per ``*.yaml``; anything else is refused."""
    found: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        body = yaml.load(path.read_text(), Loader=_LOADER)
        if not isinstance(body, dict) or body.get("kind") != "CustomResourceDefinition":
            raise Refused(f"{path.name} is not a CustomResourceDefinition; nothing was applied")
        name = (body.get("metadata") or {}).get("name")
        if name not in NAMES:
            raise Refused(
                f"{path.name} holds CRD {name!r}, not one of Ichor's ({', '.join(sorted(NAMES))})"
                "; nothing was applied"
            )
        found.append(body)
    if {b["metadata"]["name"] for b in found} != NAMES:
        raise Refused(
            f"{directory} holds {len(found)} of Ichor's {len(NAMES)} CRDs; nothing was applied"
        )
    return found


def _version(text: str | None) -> Version | None:
    """A chart version (SemVer, as Helm requires), or None for none or garbage. The
    operator's own parser: the image has no ``packaging``."""
    try:
        return parse(text) if text else None
    except VersionError:
        return None


def newer_in_cluster(existing: Mapping[str, Any], ours: str) -> str | None:
    """The chart version that applied ``existing`` when it is newer than ``ours``."""
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    theirs = annotations.get(CHART_VERSION)
    have, mine = _version(theirs), _version(ours)
    if have is not None and mine is not None and have > mine:
        return str(theirs)
    return None


def stamped(body: Mapping[str, Any], chart_version: str) -> dict[str, Any]:
    """``body`` with the annotation naming the chart version that applies it."""
    meta = dict(body.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), CHART_VERSION: chart_version}
    return {**body, "metadata": meta}


def established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def _get(api_client: ApiClient, name: str) -> dict[str, Any] | None:
    api = client.ApiextensionsV1Api(api_client)
    try:
        crd = await errors.mapped(
            api.read_custom_resource_definition(name, _request_timeout=REQUEST_TIMEOUT)
        )
    except errors.NotFound:
        return None
    return cast(dict[str, Any], api_client.sanitize_for_serialization(crd))


async def apply_one(
    api_client: ApiClient, body: Mapping[str, Any], *, chart_version: str
) -> Outcome:
    name = body["metadata"]["name"]
    existing = await _get(api_client, name)
    if existing is None:
        raise Refused(
            f"CRD {name} is not installed, and this Job only updates Ichor's CRDs: install "
            "them with the chart (its crds/ folder) or kubectl apply --server-side -f crds/, "
            "then run the upgrade again"
        )
    newer = newer_in_cluster(existing, chart_version)
    if newer is not None:
        return Outcome(
            name, False, f"{name}: kept, chart {newer} applied it, newer than {chart_version}"
        )
    api = client.ApiextensionsV1Api(api_client)
    await errors.mapped(
        api.patch_custom_resource_definition(
            name,
            stamped(body, chart_version),
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )
    )
    return Outcome(name, True, f"{name}: applied from chart {chart_version}")


async def wait_established(api_client: ApiClient, names: Sequence[str], *, within: float) -> None:
    deadline = time.monotonic() + within
    waiting = list(names)
    while waiting:
        crd = await _get(api_client, waiting[0])
        if crd is not None and established(crd):
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            raise Refused(
                f"CRD {waiting[0]} is not Established {within:.0f} s after it was applied; "
                f"read its conditions: kubectl get crd {waiting[0]} -o yaml"
            )
        await asyncio.sleep(0.5)


async def apply(directory: Path, *, chart_version: str, kube: KubeSettings) -> list[Outcome]:
    """Apply every CRD of ``directory`` with the client ``kube`` names; each outcome."""
    bodies = read(directory)
    api_client = await operator_client(kube=kube)
    try:
        outcomes = [
            await apply_one(api_client, body, chart_version=chart_version) for body in bodies
        ]
        await wait_established(api_client, [o.name for o in outcomes], within=ESTABLISHED_SECONDS)
        return outcomes
    finally:
        await api_client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ichor.crds --chart-version VERSION DIRECTORY``: 0 applied (or kept),
    1 refused or failed (one sentence), 2 usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "--chart-version":
        print("usage: python -m ichor.crds --chart-version VERSION DIRECTORY", file=sys.stderr)
        return 2
    chart_version, directory = args[1], Path(args[2])
    if _version(chart_version) is None:
        print(f"chart version {chart_version!r} is not a version; nothing was applied")
        return 1
    kube = KubeSettings.from_env()
    try:
        outcomes = asyncio.run(apply(directory, chart_version=chart_version, kube=kube))
    except (Refused, *errors.FAILED) as error:
        print(f"the CRDs were not upgraded: {error}", file=sys.stderr)
        return 1
    for outcome in outcomes:
        print(outcome.said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
