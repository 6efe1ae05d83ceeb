"""The lives the crash sweep kills the operator in, each a small description
(``crash.Flow``): how it is set up, how it starts, when it is over, what must hold.

What must hold at the end of every one, whatever the call the operator died at:
one Job per step and node, none repeated (``_job_problems``), no node upgraded twice
(the stand-in's count), the spec moved exactly once (the cluster's generation), every
owed Event present exactly once (counted by the object it is about and its reason, each
with ``count`` 1), nothing left owed (no ``pendingEvents``, no owed annotation, no
admission record) and nothing stuck (every operation ended, its finalizer gone). A flow
names the Events it owes; any other owed reason is expected zero times.

A Talos operation goes node by node: a read Job, then per node an etcd check Job (before
and after a control plane node) and the node's upgrade Job, which the real talosctl runs
against the stand-in; the read and check Jobs are deleted once read. A Kubernetes
operation has its upgrade-k8s Job between two check Jobs; a Cilium operation one Job.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ichor.api import kinds, owed, records
from ichor.api.events import (
    AutoPatchEventReason,
    ClusterEventReason,
    OperationEventReason,
    RecordEventReason,
    ReleaseCheckEventReason,
)
from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.controller.talosoperation import lifecycle
from tests.support.crash import TALOS_NODES, Context, Flow, Made, eventually

OPERATION = kinds.Kind.TALOS_OPERATION.value
CLUSTER = kinds.Kind.TALOS_CLUSTER.value
INSTALLATION = kinds.Kind.ICHOR_INSTALLATION.value

#: Every reason an owed Event can have: each is counted, expected or not.
OWED_REASONS = frozenset(
    {
        *OperationEventReason,
        *RecordEventReason,
        *AutoPatchEventReason,
        *ReleaseCheckEventReason,
        ClusterEventReason.UPGRADE_REFUSED,
        ClusterEventReason.SPEC_NOT_REACHED,
        ClusterEventReason.SPEC_REACHED,
    }
)
#: An operation's plain life: on it and on its cluster.
RAN = {
    (OPERATION, "Started"): 1,
    (OPERATION, "Succeeded"): 1,
    (CLUSTER, "UpgradeStarted"): 1,
    (CLUSTER, "UpgradeSucceeded"): 1,
}
OPEN_WINDOW = {"schedule": "* * * * *", "duration": "2h"}
TARGETS = {"talos": ["v1.14.4", "v1.14.3"], "kubernetes": ["v1.36.6"]}

Expected = Mapping[tuple[str, str], int]


def _cluster_body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": CLUSTER,
        "metadata": {"name": "prod"},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "talosconfigSecretRef": {"name": "prod-talosconfig"},
            **spec,
        },
    }


def _operation_body(type_: str, version: str | None, *, override: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterRef": {"name": "prod"}, "type": type_}
    if version is not None:
        spec["version"] = version
    if override:
        spec["override"] = True
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": OPERATION,
        "metadata": {"name": "up"},
        "spec": spec,
    }


def _status(body: Mapping[str, Any]) -> Mapping[str, Any]:
    found = body.get("status")
    return found if isinstance(found, Mapping) else {}


def _settled(body: Mapping[str, Any]) -> bool:
    """Nothing left owed on ``body``: no owed Event, no admission record."""
    annotations = records.annotations_of(body)
    return (
        not _status(body).get(owed.FIELD)
        and owed.OWED_ANNOTATION not in annotations
        and records.RECORDS not in annotations
    )


async def _observed(context: Context, **wanted: str) -> bool:
    cluster = await context.cluster()
    status = _status(cluster)
    if status.get("observedGeneration") != cluster["metadata"]["generation"]:
        return False
    return all(status.get(field) == value for field, value in wanted.items())


async def _prepare_cluster(context: Context, *, kubelet: str = "v1.36.6", **spec: Any) -> None:
    await context.create_as_holder(kinds.Plural.TALOS_CLUSTERS, _cluster_body(**spec))
    if not await eventually(
        lambda: _observed(context, kubernetesVersion=kubelet), within=60
    ) or not await eventually(lambda: _quiet(context), within=30):
        raise AssertionError(f"TalosCluster {context.namespace}/prod was not observed")
    context.generation = int((await context.cluster())["metadata"]["generation"])


async def _quiet(context: Context) -> bool:
    return _settled(await context.cluster())


async def _ended(context: Context, *, operations: int = 1) -> bool:
    """``operations`` operations Succeeded, released and settled; the cluster settled."""
    found = await context.operations()
    if len(found) != operations:
        return False
    for body in found:
        if _status(body).get("phase") != "Succeeded" or not _settled(body):
            return False
        if lifecycle.FINALIZER in (body["metadata"].get("finalizers") or ()):
            return False
    return _settled(await context.cluster())


async def _events_seen(context: Context, expected: Expected) -> bool:
    counts = _count(await context.events())
    return all(counts.get(key, 0) >= n for key, n in expected.items())


def _count(events: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = collections.Counter()
    for event in events:
        if event.get("reason") in OWED_REASONS:
            counts[(event["involvedObject"]["kind"], event["reason"])] += 1
    return counts


def _event_problems(events: list[dict[str, Any]], expected: Expected) -> list[str]:
    problems = []
    counts = _count(events)
    for key in sorted(set(counts) | set(expected)):
        if counts.get(key, 0) != expected.get(key, 0):
            said = [
                e.get("message") or ""
                for e in events
                if (e["involvedObject"]["kind"], e.get("reason")) == key
            ]
            problems.append(
                f"{key[0]} Event {key[1]}: {counts.get(key, 0)}, expected {expected.get(key, 0)}"
                + (f" ({'; '.join(said)[:600]})" if said else "")
            )
    for event in events:
        if event.get("reason") in OWED_REASONS and (event.get("count") or 1) != 1:
            problems.append(f"Event {event['metadata']['name']} counts {event['count']}")
    return problems


def _job_problems(context: Context, op: Mapping[str, Any], stored: list[Made]) -> list[str]:
    """One Job per step and node, none repeated. The Jobs that act (each node's upgrade,
    upgrade-k8s, Cilium's) were created once each and are kept: a Talos operation's one
    per node, another operation's one. The read-only ones (the read of the nodes' images,
    the etcd checks) are gone once read, and each was created once; after a fault (a
    kill, a 409, the API server away) one may be made once more, which the design allows
    (docs/operations.md: "a check Job is read or made anew"): it changes nothing. One
    left behind after a fault must be one Kubernetes removes once finished."""
    name, uid = op["metadata"]["name"], op["metadata"]["uid"]
    problems: list[str] = []
    kept = [m for m in stored if m.owner == uid]
    made = [m for m in context.created if m.owner == uid]
    seen = {m.uid for m in made}
    problems += [f"Job {m.name} of {name} was never seen created" for m in kept
                 if m.uid not in seen]  # fmt: skip
    acting = sorted(m.step for m in kept if not m.read_only)
    if (op.get("spec") or {}).get("type") == "talos":
        wanted = sorted(f"node {node.name}" for node in TALOS_NODES)
    else:
        wanted = acting if len(acting) == 1 else ["one Job"]
    if acting != wanted:
        problems.append(f"operation {name} keeps the Jobs {acting}, expected {wanted}")
    # after a fault a create may land once the Job was read and deleted (sent before the
    # API server went away, stored when it came back): left, it must go on its own
    problems += [f"operation {name} keeps the read-only Job {m.name}" for m in kept
                 if m.read_only and not (context.faulted and m.expires)]  # fmt: skip
    steps = collections.Counter(m.step for m in made)
    for step, count in sorted(steps.items()):
        read_only = next(m.read_only for m in made if m.step == step)
        most = 2 if read_only and context.faulted else 1
        if count > most:
            problems.append(f"operation {name}: {step} was created {count} times")
    return problems


async def _common(
    context: Context,
    *,
    expected: Expected,
    spec_moves: int,
    upgraded: int,
    operations: int = 1,
) -> list[str]:
    """The invariants every flow's end must hold (the module's docstring)."""
    problems: list[str] = []
    ops = await context.operations()
    if len(ops) != operations:
        problems.append(f"{len(ops)} operations, expected {operations}")
    stored = [Made.of(job) for job in await context.jobs()]
    for op in ops:
        name = op["metadata"]["name"]
        problems += _job_problems(context, op, stored)
        if _status(op).get("phase") != "Succeeded":
            problems.append(
                f"operation {name} is {_status(op).get('phase')}: {_status(op).get('message')}"
            )
        if not _settled(op):
            problems.append(f"operation {name} still owes: {_status(op).get(owed.FIELD)}")
    cluster = await context.cluster()
    moved = int(cluster["metadata"]["generation"]) - context.generation
    if moved != spec_moves:
        problems.append(f"the spec moved {moved} times, expected {spec_moves}")
    if not _settled(cluster):
        problems.append(f"the cluster still owes: {_status(cluster).get(owed.FIELD)}")
    problems += _event_problems(await context.events(), expected)
    assert context.stack.standin is not None
    records_ = context.stack.standin.records()
    for node in TALOS_NODES:
        count = records_[node.name].upgrades if node.name in records_ else 0
        if count != upgraded:
            problems.append(f"node {node.name} was upgraded {count} times, expected {upgraded}")
    return problems


def _operation_flow(
    name: str,
    type_: str,
    version: str | None,
    *,
    expected: Expected = RAN,
    spec_moves: int = 1,
    upgraded: int = 0,
    override: bool = False,
    kubelet: str = "v1.36.6",
) -> Flow:
    async def prepare(context: Context) -> None:
        await _prepare_cluster(context, kubelet=kubelet)

    async def start(context: Context) -> None:
        await context.create_as_holder(
            kinds.Plural.TALOS_OPERATIONS, _operation_body(type_, version, override=override)
        )

    async def complete(context: Context) -> bool:
        return await _ended(context) and await _events_seen(context, expected)

    async def check(context: Context) -> list[str]:
        return await _common(context, expected=expected, spec_moves=spec_moves, upgraded=upgraded)

    return Flow(name, prepare, start, complete, check, kubelet=kubelet)


#: A Talos operation: the real talosctl upgrades each node, once.
TALOS = _operation_flow("talos", "talos", "v1.14.4", upgraded=1)
#: A Kubernetes operation.
KUBERNETES = _operation_flow("kubernetes", "kubernetes", "v1.36.7")
#: A Cilium operation: no spec moves.
CILIUM = _operation_flow("cilium", "cni", None, spec_moves=0)
#: A Talos operation under override, created by a holder of the verb: the kubelets run
#: Kubernetes 1.32, which Talos 1.14 does not run. The webhook records the create (the
#: recorder's Override on the cluster), the executor passes the refusal (its Override on
#: the operation, owed before the Job exists).
OVERRIDDEN = _operation_flow(
    "overridden", "talos", "v1.14.4", override=True, upgraded=1, kubelet="v1.32.4",
    expected={**RAN, (OPERATION, "Override"): 1, (CLUSTER, "Override"): 1},
)  # fmt: skip


# --- auto-patch and the declarative mode: the operator starts the operation --------------


def _targets(context: Context) -> None:
    """The fleet's release lists, written as the operator writes them (blocking)."""
    stack = context.stack
    assert stack.account is not None
    checked = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    stack.account.patch_status(
        server=stack.plane.server, ca_file=stack.plane.ca_file,
        plural=kinds.Plural.ICHOR_INSTALLATIONS, name=kinds.INSTALLATION_NAME, namespace=None,
        status={"upgradeTargets": {"checkedAt": checked, **TARGETS}},
    )  # fmt: skip


async def _offered(context: Context) -> bool:
    """The cluster offers the Talos patch from a current list: auto-patch's start state.
    Observed before the operator saw the new release list, the cluster says the list
    cannot be used, and auto-patch turned on then waits (``AutoPatchBlocked``)."""
    choices = _status(await context.cluster()).get("upgradeChoices") or {}
    talos = choices.get("talos") or {}
    return (
        bool(talos.get("available"))
        and not talos.get("unavailableReason")
        and TARGETS["talos"][0] in (talos.get("patch") or ())
    )


async def _autopatch_prepare(context: Context) -> None:
    await context.stack.release_check(enabled=True)
    await asyncio.to_thread(_targets, context)
    await _prepare_cluster(context)
    if not await eventually(lambda: _offered(context), within=30):
        raise AssertionError(f"TalosCluster {context.namespace}/prod offers no Talos patch")


async def _autopatch_start(context: Context) -> None:
    await context.patch_cluster_spec(
        {"autoPatch": {"components": ["talos"], "windows": [OPEN_WINDOW], "minReleaseAge": "0m"}}
    )


AUTOPATCH_EXPECTED = {**RAN, (CLUSTER, "AutoPatchStarted"): 1}


async def _autopatch_complete(context: Context) -> bool:
    ops = await context.operations()
    if not ops or any(
        (op["metadata"].get("labels") or {}).get(STARTED_BY_LABEL) != "auto-patch" for op in ops
    ):
        return False
    return await _ended(context) and await _events_seen(context, AUTOPATCH_EXPECTED)


async def _autopatch_check(context: Context) -> list[str]:
    # the start of auto-patch is a spec write of the person's, then the operation's
    return await _common(context, expected=AUTOPATCH_EXPECTED, spec_moves=2, upgraded=1)


#: Auto-patch starts a Talos patch in an open window: the create owes AutoPatchStarted.
AUTOPATCH = Flow(
    "autopatch", _autopatch_prepare, _autopatch_start, _autopatch_complete, _autopatch_check
)

DECLARATIVE_EXPECTED = {**RAN, (CLUSTER, "SpecReached"): 1}


async def _declarative_prepare(context: Context) -> None:
    await _prepare_cluster(context, upgradeStrategy="Declarative")


async def _declarative_start(context: Context) -> None:
    await context.patch_cluster_spec({"talosVersion": "v1.14.4"})


async def _declarative_complete(context: Context) -> bool:
    cluster = await context.cluster()
    reached = next(
        (c for c in _status(cluster).get("conditions") or () if c.get("type") == "SpecReached"),
        None,
    )
    return (
        reached is not None
        and reached.get("status") == "True"
        and reached.get("observedGeneration") == cluster["metadata"]["generation"]
        and await _ended(context)
        and await _events_seen(context, DECLARATIVE_EXPECTED)
    )


async def _declarative_check(context: Context) -> list[str]:
    # the person's spec bump is the one move: the executor never writes a Declarative spec
    return await _common(context, expected=DECLARATIVE_EXPECTED, spec_moves=1, upgraded=1)


#: A Declarative cluster's spec bump: the controller starts the Talos operation.
DECLARATIVE = Flow(
    "declarative",
    _declarative_prepare,
    _declarative_start,
    _declarative_complete,
    _declarative_check,
)


# --- the release check ---------------------------------------------------------------


def _release_flow() -> Flow:
    """The release check lists the stack's registry (talos, kubernetes, chart; the
    chart's is never seeded, so its listing fails and owes one Warning); over once the
    lists are written and the Event posted."""
    expected = {(INSTALLATION, ReleaseCheckEventReason.LISTING_FAILED.value): 1}

    async def prepare(context: Context) -> None:
        await context.stack.release_check(enabled=False)
        stack = context.stack
        assert stack.account is not None
        await asyncio.to_thread(
            stack.account.patch_status, server=stack.plane.server, ca_file=stack.plane.ca_file,
            plural=kinds.Plural.ICHOR_INSTALLATIONS, name=kinds.INSTALLATION_NAME,
            namespace=None,
            status={"upgradeTargets": None, "latestRelease": None, "conditions": None,
                    owed.FIELD: None},
        )  # fmt: skip
        for event in await context.installation_events():
            await context.core.delete_namespaced_event(event["metadata"]["name"], "default")

    async def start(context: Context) -> None:
        await context.stack.release_check(enabled=True)

    async def complete(context: Context) -> bool:
        body = await context.installation()
        targets = _status(body).get("upgradeTargets") or {}
        return (
            bool(targets.get("talos"))
            and _settled(body)
            and _count(await context.installation_events()).get(
                (INSTALLATION, ReleaseCheckEventReason.LISTING_FAILED.value), 0
            )
            >= 1
        )

    async def check(context: Context) -> list[str]:
        body = await context.installation()
        problems = _event_problems(await context.installation_events(), expected)
        if not _settled(body):
            problems.append(f"the installation still owes: {_status(body).get(owed.FIELD)}")
        targets = _status(body).get("upgradeTargets") or {}
        if targets.get("talos") != ["v1.14.4", "v1.14.3"]:
            problems.append(f"the Talos list is {targets.get('talos')}")
        return problems

    return Flow("release", prepare, start, complete, check)


#: The release check, on from off.
RELEASE = _release_flow()

OPERATION_FLOWS = (TALOS, KUBERNETES, CILIUM, OVERRIDDEN, AUTOPATCH, DECLARATIVE)

__all__ = [
    "AUTOPATCH", "CILIUM", "DECLARATIVE", "KUBERNETES", "OVERRIDDEN", "RELEASE", "TALOS",
]  # fmt: skip
