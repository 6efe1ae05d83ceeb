"""Reads of the Talos API as a short Job of talosctl, and what their output says; pure.

The operator never speaks to a Talos node itself: a read is a Job owned by the operation,
whose containers run ``talosctl get <resource> --nodes <all> -o json`` on the image,
credentials and network path of the upgrade that follows (docs/design/notes.md, "Each
node's own image, and where the Talos API read runs"). talosctl prints one JSON document
per resource with the node it came from (cmd/talosctl/cmd/talos/output/json.go) and its
errors as other lines: a node absent from a container's documents is unread, and the
other lines say why. Every value is untrusted input: bounded, read by shape, never by
exception.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ichor.api.taloscluster import NodeImageGroup, NodeImages
from ichor.controller.talosoperation import jobs
from ichor.settings import ExecutorSettings
from ichor.upgrade.node_images import (
    SCHEMATIC_EXTENSION,
    NodeImage,
    NodeReading,
    factory_host,
    group_key,
    short,
)

#: The most bytes of one container's log read (about 2 KiB per node and resource: a
#: 500-node cluster's extensions fit).
MAX_LOG_BYTES = 4 * 1024 * 1024
#: Characters of talosctl's own error lines kept for a message.
MAX_ERROR_CHARS = 600

#: The containers of a read Job: (name, the talosctl resource it gets).
IMAGE_READS = (
    ("extensions", "extensions"),
    ("platform", "platformmetadata"),
    ("security", "securitystate"),
)


@dataclass(frozen=True)
class Reads:
    """What a read Job reads: each container's name and talosctl's arguments before and
    after ``--nodes``; and why a read of no node is refused."""

    containers: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]
    empty: str

    def args(self, nodes: str) -> list[tuple[str, list[str]]]:
        return [(c, [*before, "--nodes", nodes, *after]) for c, before, after in self.containers]


#: Each node's image state, one resource per container.
IMAGES = Reads(
    containers=tuple((c, ("get", r), ("-o", "json")) for c, r in IMAGE_READS),
    empty="a read needs at least one node",
)


def read_job(
    *,
    operation: jobs.OperationRef,
    name: str,
    talos_version: str,
    addresses: Sequence[str],
    talosconfig: jobs.SecretMount,
    settings: ExecutorSettings,
    reads: Reads = IMAGES,
) -> jobs.JobManifest:
    """The Job that reads ``reads`` (by default each node's image state): one container
    per read, side by side, each for every node (talosctl reads the nodes one after the
    other and keeps going past one that fails, cmd/talosctl/pkg/talos/helpers/
    resources.go), with the talosctl of the Talos the cluster runs."""
    if not addresses:
        raise ValueError(reads.empty)
    return jobs.read_job(
        operation=operation,
        name=name,
        talos_version=talos_version,
        reads=reads.args(",".join(addresses)),
        talosconfig=talosconfig,
        settings=settings,
    )


@dataclass(frozen=True)
class Documents:
    """A container's log read as talosctl's output: the JSON documents, and the rest."""

    documents: tuple[Mapping[str, Any], ...] = ()
    errors: str = ""

    def by_node(self) -> dict[str, list[Mapping[str, Any]]]:
        found: dict[str, list[Mapping[str, Any]]] = {}
        for document in self.documents:
            node = document.get("node")
            if isinstance(node, str):
                found.setdefault(node, []).append(document)
        return found


def documents(log: str) -> Documents:
    """talosctl's JSON documents in ``log`` (indented objects, one after another) and the
    other lines (its warnings and errors), bounded."""
    decoder = json.JSONDecoder()
    found: list[Mapping[str, Any]] = []
    other: list[str] = []
    index, end = 0, len(log)
    while index < end:
        if log[index].isspace():
            index += 1
            continue
        if log[index] == "{":
            try:
                value, after = decoder.raw_decode(log, index)
            except ValueError:
                value, after = None, -1
            if isinstance(value, dict) and after > index:
                found.append(value)
                index = after
                continue
        stop = log.find("\n", index)
        stop = end if stop == -1 else stop
        line = log[index:stop].strip()
        if line:
            other.append(line)
        index = stop + 1
    text = " | ".join(other)
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return Documents(documents=tuple(found), errors=text)


def _spec(document: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = document.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _text(value: object, *, most: int = 253) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= most else None


@dataclass(frozen=True)
class ImageState:
    """Each node's image parts as read (by address), and why a node could not be read."""

    images: Mapping[str, NodeImage] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)


def _extensions(docs: Sequence[Mapping[str, Any]]) -> tuple[str | None, str | None, list[str]]:
    """(schematic, factory host, extension names) of one node's ExtensionStatuses."""
    schematic: str | None = None
    factory: str | None = None
    names: list[str] = []
    for document in docs:
        meta = _spec(document).get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = _text(meta.get("name"))
        if name is None:
            continue
        if name == SCHEMATIC_EXTENSION:
            schematic = _text(meta.get("version"), most=128)
            factory = factory_host(str(meta.get("author") or ""))
        else:
            names.append(name)
    return schematic, factory, sorted(set(names))


def image_state(
    logs: Mapping[str, str],
    *,
    addresses: Iterable[str],
    exit_codes: Mapping[str, int] | None = None,
) -> ImageState:
    """Each node's ``NodeImage`` from a read Job's container logs (by container name),
    or the problem that keeps it unread: a resource the node did not answer (with
    talosctl's own error lines), a platform or SecureBoot value missing, or a
    ``schematic`` meta-extension whose author names no factory host.

    A node without extensions prints no ExtensionStatus at all, and talosctl's errors do
    not say which node failed: a node absent from the extensions is read as having none
    only when that container ended cleanly (exit code 0 when ``exit_codes`` has it, else
    no line but documents), and is unread otherwise.
    """
    read = {name: documents(logs.get(name, "")) for name, _ in IMAGE_READS}
    by_node = {name: docs.by_node() for name, docs in read.items()}
    codes = exit_codes or {}
    clean = codes["extensions"] == 0 if "extensions" in codes else not read["extensions"].errors
    images: dict[str, NodeImage] = {}
    problems: dict[str, str] = {}
    for address in addresses:
        unanswered = _unanswered(address, read, by_node, clean=clean)
        found = unanswered or _node_image(
            by_node["platform"][address][0],
            by_node["security"][address][0],
            by_node["extensions"].get(address, []),
        )
        if isinstance(found, NodeImage):
            images[address] = found
        else:
            problems[address] = found
    return ImageState(images=images, problems=problems)


def _unanswered(
    address: str,
    read: Mapping[str, Documents],
    by_node: Mapping[str, Mapping[str, list[Mapping[str, Any]]]],
    *,
    clean: bool,
) -> str | None:
    """The resources the node at ``address`` did not answer, with talosctl's errors of
    those reads; None when it answered each (its extensions may be absent from a clean
    read: it has none)."""
    missing = [
        resource
        for container, resource in IMAGE_READS
        if address not in by_node[container] and not (container == "extensions" and clean)
    ]
    if not missing:
        return None
    said = "; ".join(read[c].errors for c, r in IMAGE_READS if r in missing and read[c].errors)
    return f"no {', '.join(missing)}" + (f" ({said})" if said else "")


def _node_image(
    platform_doc: Mapping[str, Any],
    security_doc: Mapping[str, Any],
    extension_docs: Sequence[Mapping[str, Any]],
) -> NodeImage | str:
    """One node's image from its documents, or why it is unread."""
    platform = _text(_spec(platform_doc).get("platform"), most=63)
    secure_boot = _spec(security_doc).get("secureBoot", False)
    schematic, factory, names = _extensions(extension_docs)
    if platform is None or not platform.replace("-", "").isalnum():
        return "its platformmetadata names no platform"
    if not isinstance(secure_boot, bool):
        return "its securitystate says no readable secureBoot"
    if schematic is not None and factory is None:
        return f"its schematic meta-extension ({schematic[:12]}) names no Image Factory host"
    if schematic is not None and not all(c in "0123456789abcdef" for c in schematic):
        return "its schematic meta-extension is not a schematic ID"
    return NodeImage(
        platform=platform,
        secure_boot=secure_boot,
        schematic=schematic,
        factory=factory,
        extensions=tuple(names),
    )


@dataclass(frozen=True)
class ReadOutput:
    """What a read Job's containers printed (by container name), their exit codes, and
    how the Job ended when it failed (empty when it completed)."""

    logs: Mapping[str, str] = field(default_factory=dict)
    exit_codes: Mapping[str, int] = field(default_factory=dict)
    failure: str = ""


def exit_codes(pods: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The exit code of each terminated container of a Job's pod (its first pod)."""
    found: dict[str, int] = {}
    for pod in pods[:1]:
        status = pod.get("status")
        statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
        for container in statuses if isinstance(statuses, list) else ():
            if not isinstance(container, Mapping):
                continue
            state = container.get("state")
            ended = state.get("terminated") if isinstance(state, Mapping) else None
            code = ended.get("exitCode") if isinstance(ended, Mapping) else None
            if isinstance(code, int) and isinstance(container.get("name"), str):
                found[container["name"]] = code
    return found


#: The Node annotation Talos writes with the node's schematic ID
#: (internal/app/machined/pkg/controllers/k8s/node_annotation_spec.go).
SCHEMATIC_ANNOTATION = "extensions.talos.dev/schematic"


def readings(
    items: Iterable[Mapping[str, Any]], state: ImageState, *, addresses: Mapping[str, str]
) -> tuple[NodeReading, ...]:
    """One ``NodeReading`` per workload Node (raw ``items``) the read was for:
    ``addresses`` maps each Node name to the address talosctl named it by."""
    found: list[NodeReading] = []
    for item in items:
        meta = item.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = str(meta.get("name", ""))
        if name not in addresses:
            continue
        labels = meta.get("labels")
        labels = labels if isinstance(labels, Mapping) else {}
        annotations = meta.get("annotations")
        annotation = (annotations if isinstance(annotations, Mapping) else {}).get(
            SCHEMATIC_ANNOTATION
        )
        address = addresses[name]
        found.append(
            NodeReading(
                name=name,
                labels={str(k): str(v) for k, v in labels.items()},
                annotation=annotation if isinstance(annotation, str) else None,
                image=state.images.get(address),
                problem=state.problems.get(address),
            )
        )
    return tuple(found)


def node_image_status(readings: Sequence[NodeReading], *, now: datetime) -> NodeImages:
    """``status.nodeImages`` from a read: the nodes grouped by identical image, largest
    group first, and one sentence per node that could not be read or disagrees."""
    groups: dict[tuple[str, bool, str, str, tuple[str, ...]], list[str]] = {}
    images: dict[tuple[str, bool, str, str, tuple[str, ...]], NodeImage] = {}
    unreadable: list[str] = []
    for reading in readings:
        image = reading.image
        if image is None:
            unreadable.append(f"Node {reading.name}: {reading.problem or 'not read'}")
            continue
        if reading.annotation is not None and reading.annotation != (image.schematic or ""):
            unreadable.append(
                f"Node {reading.name}: its annotation {SCHEMATIC_ANNOTATION} names "
                f"{short(reading.annotation)}, the Talos API {short(image.schematic)}"
            )
        key = group_key(image)
        groups.setdefault(key, []).append(reading.name)
        images[key] = image
    ordered = sorted(groups, key=lambda k: (-len(groups[k]), k))
    count = len(ordered)
    return NodeImages(
        read_at=now,
        summary=f"{count} image{'s' if count != 1 else ''}"
        + (f", {len(unreadable)} refused" if unreadable else ""),
        differ=count > 1,
        groups=tuple(
            NodeImageGroup(
                platform=images[k].platform,
                secure_boot=images[k].secure_boot,
                schematic=images[k].schematic,
                factory=images[k].factory,
                extensions=images[k].extensions,
                nodes=tuple(sorted(groups[k])),
            )
            for k in ordered
        ),
        unreadable=tuple(unreadable),
    )


# --- etcd, between control plane nodes ---------------------------------------------------

#: The containers of an etcd check: what ``talosctl health`` reads of etcd
#: (pkg/cluster/check/etcd.go: every control plane node's member list, consistent, its
#: members the control plane nodes) and each member's own status (``talosctl etcd status``,
#: for its errors, alarms and leader).
ETCD_READS = (("members", ("etcd", "members")), ("status", ("etcd", "status")))
#: A member ID of no member: etcd's leader field when there is no leader.
NO_LEADER = "0000000000000000"


#: An etcd check on every control plane node (``addresses``).
ETCD = Reads(
    containers=tuple((c, args, ()) for c, args in ETCD_READS),
    empty="an etcd check needs the control plane nodes",
)
#: The Job of an etcd check (``read_job`` of ``ETCD``).
etcd_job = functools.partial(read_job, reads=ETCD)


def table(text: str, *, first: str = "NODE") -> list[dict[str, str]]:
    """The rows of a talosctl table (text/tabwriter: columns start where the header's
    names start, cells may hold single spaces); lines before the header, and warning
    lines, are not rows."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(first + " ")), None)
    if at is None:
        return []
    header, index = lines[at], at
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    rows = []
    for line in lines[index + 1 :]:
        if not line.strip() or line.startswith(("WARNING", "error", "Error")):
            continue
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def _rows(text: str) -> set[str]:
    """The lines of ``text`` that are rows of its table (each starts with an address)."""
    return {line for line in text.splitlines() if line[:1].isdigit() or line.startswith("[")}


def _host(url: str) -> str:
    host = urlsplit(url.strip()).hostname
    return host or ""


@dataclass(frozen=True)
class EtcdHealth:
    """What an etcd check found: one sentence per problem (none: healthy)."""

    problems: tuple[str, ...] = ()
    members: int = 0

    @property
    def healthy(self) -> bool:
        return not self.problems


def etcd_health(
    output: ReadOutput, *, control_plane: Mapping[str, str], only: Iterable[str] = ()
) -> EtcdHealth:
    """etcd healthy with every member, as ``talosctl health`` judges it
    (pkg/cluster/check/etcd.go), from an etcd check's output. ``control_plane``: each
    control plane node's address -> name. ``only``: the nodes whose own member must be
    back (after their upgrade); empty: every member (before a control plane node).

    Each node must answer both reads; every member list must be the same; each member
    must be a control plane node (its peer URL's host among their addresses), not a
    learner, and every control plane node a member; each member's status must name a
    leader and no error (etcd's own, its alarms among them).
    """
    only = tuple(only)
    rows = table(output.logs.get("members", ""))
    statuses = {row.get("NODE", ""): row for row in table(output.logs.get("status", ""))}
    lists = _member_lists(rows)
    known = [found for found in lists.values() if found]
    wanted = [a for a, n in control_plane.items() if not only or n in only]
    problems = [
        *_answers(
            wanted,
            control_plane,
            members={row.get("NODE", "") for row in rows},
            statuses=statuses,
            said=_unparsed(output),
        ),
        *_membership(known, control_plane, wanted=wanted, only=only),
    ]
    return EtcdHealth(
        problems=tuple(dict.fromkeys(problems)), members=len(known[0]) if known else 0
    )


def _member_lists(rows: Iterable[Mapping[str, str]]) -> dict[str, set[tuple[str, str, str]]]:
    """Each node's member list: (ID, peer URLs, learner) of each member it lists."""
    lists: dict[str, set[tuple[str, str, str]]] = {}
    for row in rows:
        key = (row.get("ID", ""), row.get("PEER URLS", ""), row.get("LEARNER", ""))
        lists.setdefault(row.get("NODE", ""), set()).add(key)
    return lists


def _unparsed(output: ReadOutput) -> str:
    """The lines of the check's output that are neither a header nor a row (talosctl's
    errors), bounded."""
    return " | ".join(
        line.strip()
        for text in output.logs.values()
        for line in text.splitlines()
        if line.strip() and not line.startswith("NODE ") and line not in _rows(text)
    )[:MAX_ERROR_CHARS]


def _answers(
    wanted: Iterable[str],
    control_plane: Mapping[str, str],
    *,
    members: set[str],
    statuses: Mapping[str, Mapping[str, str]],
    said: str,
) -> Iterator[str]:
    """Each wanted node answers both reads, and its member's status is sound."""
    for address in wanted:
        name = control_plane[address]
        if address not in members or address not in statuses:
            yield f"etcd on {name} does not answer" + (f" ({said})" if said else "")
            continue
        yield from _status_problems(name, statuses[address])


def _status_problems(name: str, status: Mapping[str, str]) -> Iterator[str]:
    """A member's own status: no error (its alarms among them), a leader, a voter."""
    if status.get("ERRORS"):
        yield f"etcd on {name} reports: {status['ERRORS']}"
    elif status.get("LEADER", NO_LEADER) in ("", NO_LEADER):
        yield f"etcd on {name} has no leader"
    if status.get("LEARNER") == "true":
        yield f"etcd on {name} is a learner, not yet a voting member"


def _membership(
    known: Sequence[set[tuple[str, str, str]]],
    control_plane: Mapping[str, str],
    *,
    wanted: Iterable[str],
    only: Sequence[str],
) -> Iterator[str]:
    """The member lists agree, each member is a control plane node and a voter (of the
    nodes ``only`` names, when it names any), and each wanted node is a member."""
    if not known:
        return
    first = known[0]
    if any(found != first for found in known[1:]):
        yield "the control plane nodes list different etcd members"
    hosts = {_host(peer.split(",")[0]) for _, peer, _ in first}
    for _, peer, learner in first:
        host = _host(peer.split(",")[0])
        if host not in control_plane:
            yield f"etcd member at {host or peer} is not a control plane node"
        elif learner == "true" and (not only or control_plane[host] in only):
            yield f"etcd member of {control_plane[host]} is a learner"
    for address in wanted:
        if address not in hosts:
            yield f"{control_plane[address]} is not an etcd member"
