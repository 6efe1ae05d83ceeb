"""The TalosCluster controller: observe each workload cluster, write its status.

kopf's watches feed it (``wiring``); a bounded pool of workers reconciles one cluster at
a time per key (``queue``): read the workload cluster when due, under one deadline, as the
TalosCluster's ServiceAccount without a kubeconfig Secret; compute the status with
``status.evaluate`` (pure); write the difference, then post the Events. A changed
``upgradeTargets`` or site policy recomputes every cluster from memory. A spec the model
cannot read is reported once and left alone until it changes.

More in docs/design/notes.md, "ichor/controller/taloscluster/reconciler.py".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds, owed
from ichor.api.conditions import ClusterReason, SpecReachedReason
from ichor.api.events import AutoPatchEventReason, ClusterEventReason
from ichor.api.reading import read_model
from ichor.api.taloscluster import (
    DEFAULT_KUBECONFIG_KEY,
    DETECTED_CILIUM,
    TalosClusterSpec,
    TalosClusterStatus,
)
from ichor.controller.autopatch import runner as autopatch
from ichor.controller.declarative import decisions, starting
from ichor.controller.declarative.decisions import ActiveOperation, Decision
from ichor.controller.keyed import ClusterKeyed, Key
from ichor.controller.observe import (
    NodesObservation,
    NodesTally,
    Observation,
    _items,
    cilium_namespace,
    cni_observation,
    unreadable_nodes,
)
from ichor.controller.taloscluster.status import (
    Failure,
    Installation,
    evaluate,
    policy_tally,
    read_spec,
    with_auto_patch,
)
from ichor.kube import (
    accounts,
    bodies,
    clock,
    errors,
    events,
    metrics,
    objects,
    owing,
    untrusted,
)
from ichor.kube.accounts import ServiceAccount, Unnamed
from ichor.kube.bodies import PlannedEvent, merge_patch
from ichor.kube.clients import (
    REQUEST_TIMEOUT,
    KubeconfigError,
    client_from_kubeconfig,
    read_secret_key,
    read_within,
)
from ichor.kube.impersonation import ReadRefused, impersonating, refusal, refused_message
from ichor.kube.patching import patch_status
from ichor.release.policy import SitePolicy
from ichor.settings import ControllerSettings, CredentialSettings, TenantSettings

logger = logging.getLogger(__name__)

#: Seconds a workload client keeps an idle connection (aiohttp's default is 15): the
#: requests of one observation, milliseconds apart, share it, and none is held from one
#: observation to the next. Each TLS connection holds asyncio's 256 KiB read buffer, so
#: keeping one per cluster open between observations would cost a thousand clusters 256
#: MiB; a new TLS handshake per observation costs about a millisecond of CPU instead. An
#: idle connection closes between one and two of these after its last request, so a
#: fleet observed at R clusters a second holds some R x 1.5 x 0.25 of them besides those
#: in use: with 2 s, a thousand clusters held up to 238 open (58 MiB of buffers).
WORKLOAD_IDLE_SECONDS = 0.25
#: Seconds the count of ``status.sitePolicy`` waits before it is written, so a policy
#: change that recomputes every cluster is one write, not one per cluster.
SITE_POLICY_SETTLE = 1.0

SecretKey = tuple[str, str, str]  # (namespace, secret name, data key)


@dataclass
class _Cluster:
    body: Mapping[str, Any]
    observation: Observation | None = None
    failure: Failure | None = None
    failures: int = 0
    #: Loop time at which the workload cluster is read again.
    next_observe: float = 0.0
    #: The kubeconfig Secret the last read used (None: the operator's own cluster).
    source: SecretKey | None = None
    #: Without a kubeconfig Secret: the account the last read was made as, or why none.
    account: ServiceAccount | Unnamed | None = None
    #: Set once a spec the model cannot read was reported; cleared by a new generation.
    parked_generation: int | None = None
    #: Declarative: a start's lasting outcome (the webhook's rule refused it, its
    #: operation failed) by (generation, type, version), so the same spec is not started
    #: again: no retry loop.
    declared: dict[tuple[int | None, str, str], Decision] = field(default_factory=dict)
    #: Declarative: starts deferred in a row (5xx, 429, a race), for the backoff.
    deferrals: int = 0
    #: The site policy this cluster was last judged with, and its entries that act on it.
    site: tuple[SitePolicy, frozenset[str]] | None = None


#: The cluster controller's Events a stored status owes: what auto-patch and the
#: declarative mode decided (a start, a suspension and halt, a gate that stopped a start,
#: a refused or failed spec, a spec reached). Its other Events say what it observed: a
#: restart observes again, and the conditions hold the same.
OWED_REASONS = frozenset(
    {
        *AutoPatchEventReason,
        ClusterEventReason.UPGRADE_REFUSED,
        ClusterEventReason.SPEC_NOT_REACHED,
        ClusterEventReason.SPEC_REACHED,
    }
)


def _owed(
    body: Mapping[str, Any], planned: Sequence[PlannedEvent], *, now: datetime
) -> tuple[dict[str, owed.OwedEvent], list[PlannedEvent]]:
    """The Events of ``planned`` a write of ``body``'s status owes, by key (the cluster's
    uid, the resourceVersion decided from, the reason and message: the same decision
    taken again from the same object is the same Event), and the rest."""
    meta: Mapping[str, Any] = body.get("metadata") or {}
    uid, version = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
    owes: dict[str, owed.OwedEvent] = {}
    told: list[PlannedEvent] = []
    for event in planned:
        if event.reason not in OWED_REASONS:
            told.append(event)
            continue
        key = owed.key(uid, version, event.reason, event.message)
        owes[key] = owed.owe(str(event.type), event.reason, event.message, at=now)
    return owes, told


class _NotRead(Exception):
    """No account may read the cluster the operator runs in for this TalosCluster."""


def _describe(error: BaseException) -> str:
    """The failed read in the project's words (``errors.describe``): never the text of
    the server, the TLS library or the exception, which a tenant's server chooses."""
    return errors.describe(error)


def _unexpected(error: BaseException) -> str:
    """An answer no reader expected, named by the kind of error only (its text may quote
    the answer; the log keeps it)."""
    return (
        f"the workload cluster's answer could not be read ({type(error).__name__}); "
        "the Nodes' versions are not known"
    )


def _site_status(body: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``status.sitePolicy`` as stored (None: none)."""
    found = ((body or {}).get("status") or {}).get("sitePolicy")
    return dict(found) if isinstance(found, Mapping) else None


def _auto_patch_parts(body: Mapping[str, Any] | None) -> tuple[object, object]:
    if body is None:
        return None, None
    return (body.get("spec") or {}).get("autoPatch"), (body.get("status") or {}).get("autoPatch")


class ClusterController(ClusterKeyed[ControllerSettings]):
    def __init__(
        self,
        api: ApiClient,
        settings: ControllerSettings,
        tenants: TenantSettings | None = None,
        credentials: CredentialSettings | None = None,
    ) -> None:
        super().__init__(api, settings, tenants=tenants, credentials=credentials)
        self.clusters: dict[Key, _Cluster] = {}
        self.installation = Installation()
        #: The IchorInstallation as last seen, for auto-patch (its settings and record).
        self.installation_body: Mapping[str, Any] | None = None
        self.autopatch = autopatch.AutoPatcher(
            api=api,
            health_resources=settings.health_check_resources,
            ask_timeout=settings.observe_timeout,
        )
        self._workload: dict[SecretKey, tuple[str, ApiClient]] = {}
        #: Pending or Running operations by (namespace, operation name): their cluster
        #: and what they do, for the cluster's ``Reconciling`` condition.
        self.operations: dict[Key, tuple[str, ActiveOperation]] = {}
        #: ``status.sitePolicy`` as last written (or read), the one waiting to be written,
        #: and the task writing it.
        self._site_written: dict[str, Any] | None = None
        self._site_wanted: dict[str, Any] | None = None
        self._site_writer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.queue.start()

    async def load_installation(self) -> None:
        """Read the IchorInstallation once before the first reconcile, so clusters seen
        at startup get their choices in one write rather than two."""
        try:
            body = await objects.get_installation(self.api)
        except errors.FAILED as error:
            logger.warning("IchorInstallation not read at startup: %s", error)
            return
        if body is None:
            return
        self.installation = Installation.from_body(body)
        self.installation_body = body
        self._site_written = _site_status(body)

    async def stop(self) -> None:
        if self._site_writer is not None:
            self._site_writer.cancel()
            await asyncio.gather(self._site_writer, return_exceptions=True)
        await self.queue.stop()
        await self.autopatch.close()
        for _, workload in self._workload.values():
            await workload.close()
        self._workload.clear()

    # --- fed by the watches -------------------------------------------------------------

    def cluster_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        body = bodies.without_managed_fields(body)  # kept for every cluster
        meta = body.get("metadata", {})
        key: Key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event_type == "DELETED":
            self.clusters.pop(key, None)
            self.queue.forget(key)
            metrics.cluster_forgotten(key)
            self._tally_site()
            return
        known = self.clusters.get(key)
        if known is None:
            self.clusters[key] = _Cluster(body=body)
            self.queue.add(key)
            return
        known.body = body
        generation = bodies.generation(body)
        if generation != bodies.observed_generation(body) and generation != known.parked_generation:
            self.queue.add(key)

    def operation_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """An operation appeared, moved or went: its cluster is reconciled again when
        what it shows of the operation changed."""
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        key: Key = (namespace, str(meta.get("name", "")))
        before = self.operations.get(key)
        after = None if event_type == "DELETED" else ActiveOperation.from_body(body)
        if before == after:
            return
        if after is None:
            self.operations.pop(key, None)
        else:
            self.operations[key] = after
        for cluster in {entry[0] for entry in (before, after) if entry is not None}:
            known = self.clusters.get((namespace, cluster))
            if known is None:
                continue
            if before is not None and after is None:
                known.next_observe = 0.0  # it ended: read what the Nodes run now
            self.queue.add((namespace, cluster))

    def active_operations(self, key: Key) -> tuple[ActiveOperation, ...]:
        namespace, name = key
        return tuple(
            op
            for (op_namespace, _), (cluster, op) in self.operations.items()
            if op_namespace == namespace and cluster == name
        )

    def installation_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        raw = None if event_type == "DELETED" else body
        installation = Installation.from_body(raw)
        before = _auto_patch_parts(self.installation_body)
        fleet_account = accounts.fleet_default(self.installation_body)
        self.installation_body = raw
        self._site_written = _site_status(raw)
        if (
            installation == self.installation
            and before == _auto_patch_parts(raw)
            and fleet_account == accounts.fleet_default(raw)
        ):
            return
        self.installation = installation
        for key in self.clusters:
            self.queue.add(key)

    # --- one cluster --------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        cluster = self.clusters.get(key)
        if cluster is None:
            return
        body = cluster.body
        generation = bodies.generation(body)
        spec, _ = read_spec(body.get("spec") or {})
        if spec is not None:
            await self._observe_when_due(key, cluster, spec)
        decided = await self._declare(key, cluster, spec) if spec is not None else None
        now = clock.now()  # the one clock of this look
        raw_status: Mapping[str, Any] = body.get("status") or {}
        previous = read_model(TalosClusterStatus, raw_status) or TalosClusterStatus()
        outcome = evaluate(
            spec=body.get("spec") or {},
            generation=generation,
            previous=previous,
            observation=cluster.observation,
            failure=cluster.failure,
            installation=self.installation,
            now=now,
            active=self.active_operations(key),
            declared=decided.declared() if decided is not None else None,
        )
        cluster.site = (self.installation.policy, outcome.site_entries)
        self._tally_site()
        # Declarative: the spec is the desired state and only its bump starts an upgrade;
        # an auto-patch would move the Nodes past a spec nobody writes.
        auto = (
            await self._auto_patch(cluster, outcome.status, now=now)
            if spec is not None and decided is None
            else None
        )
        new_status = _with_auto(outcome.status, auto, generation=generation, now=now)
        metrics.cluster_conditions(
            namespace=key[0], cluster=key[1], conditions=new_status.conditions
        )
        # the Events of a decision a person acts on are owed by this write; the rest are
        # observations, posted after it at best
        owes, told = _owed(body, [*outcome.events, *(auto.events if auto else ())], now=now)
        new_status = new_status.model_copy(
            update={"pending_events": owed.merged(previous.pending_events, owes)}
        )
        metrics.upgrades_available(
            namespace=key[0], cluster=key[1], choices=outcome.status.upgrade_choices
        )
        if not await self._write_and_post(key, cluster, raw_status, new_status, told):
            return
        self._again(key, cluster, spec, generation, wake_at=auto.wake_at if auto else None, now=now)

    async def _write_and_post(
        self,
        key: Key,
        cluster: _Cluster,
        raw_status: Mapping[str, Any],
        status: TalosClusterStatus,
        told: Sequence[PlannedEvent],
    ) -> bool:
        """Write the status with the Events it owes, post the observations when it changed
        and then what the stored status owes; False when a step failed (retried)."""
        body = cluster.body
        written = await self._write(key, cluster, raw_status, status)
        if written is None:
            return False
        changed, stored = written
        if changed:
            await self._post(body, told)
        return not owing.owes(stored) or await self._flush(key, cluster, stored)

    async def _observe_when_due(self, key: Key, cluster: _Cluster, spec: TalosClusterSpec) -> None:
        """Read the workload cluster when its observation is due, or its source moved."""
        namespace = key[0]
        ref = spec.kubeconfig_secret_ref
        source = (namespace, ref.name, ref.key or DEFAULT_KUBECONFIG_KEY) if ref else None
        account = None if ref else self._account(namespace, spec)
        first = cluster.observation is None and cluster.failure is None
        moved = source != cluster.source or account != cluster.account
        if first or moved or asyncio.get_running_loop().time() >= cluster.next_observe:
            await self._observe(cluster, source, account)

    async def _auto_patch(
        self, cluster: _Cluster, status: TalosClusterStatus, *, now: datetime
    ) -> autopatch.Result:
        return await self.autopatch.reconcile(
            body=cluster.body,
            status=status,
            not_ready=cluster.observation.nodes.not_ready if cluster.observation else None,
            workload=self._cached_workload(cluster),
            installation=self.installation_body,
            now=now,
        )

    async def _write(
        self,
        key: Key,
        cluster: _Cluster,
        raw_status: Mapping[str, Any],
        status: TalosClusterStatus,
    ) -> tuple[bool, Mapping[str, Any]] | None:
        """Write what differs from ``raw_status``: whether anything differed and the
        object as stored, or None when the write failed (retried after the backoff) or
        the cluster went."""
        patch = merge_patch(raw_status, status.to_api())
        if not patch:
            return False, cluster.body
        namespace, name = key
        try:
            written = await patch_status(
                self.api,
                kind=kinds.Kind.TALOS_CLUSTER,
                name=name,
                namespace=namespace,
                status_patch=patch,
            )
        except errors.NotFound:
            return None  # deleted meanwhile; the watch says so next
        except errors.FAILED as error:
            logger.warning("status of %s/%s not written: %s", namespace, name, error)
            self.queue.add_after(key, self.settings.backoff_initial)
            return None
        if self.clusters.get(key) is cluster:
            cluster.body = bodies.without_managed_fields(written)
        return True, written

    def _again(
        self,
        key: Key,
        cluster: _Cluster,
        spec: TalosClusterSpec | None,
        generation: int | None,
        *,
        wake_at: datetime | None,
        now: datetime,
    ) -> None:
        """When to look again: the next observation, or sooner when auto-patch wakes; a
        spec the model cannot read is left alone until it changes."""
        if spec is None:
            cluster.parked_generation = generation
            return
        cluster.parked_generation = None
        delay = cluster.next_observe - asyncio.get_running_loop().time()
        if wake_at is not None:
            delay = min(delay, max((wake_at - now).total_seconds(), 1.0))
        self.queue.add_after(key, delay)

    # --- the site policy's count ----------------------------------------------------------

    def _tally_site(self) -> None:
        """Count the clusters each policy entry acts on, once every cluster was judged
        with the current policy, and have the count written when it changed."""
        body = self.installation_body
        policy = self.installation.policy
        if body is None or (policy.empty and self._site_written is None):
            return  # no installation, or no policy now nor a count of an earlier one
        judged = [cluster.site for cluster in self.clusters.values()]
        acting = [site[1] for site in judged if site is not None and site[0] == policy]
        if len(acting) != len(judged):
            return  # some cluster is still judged with the previous policy
        tally = policy_tally(
            policy=policy,
            generation=bodies.generation(body),
            acting=acting,
        ).to_api()
        if tally == self._site_written or tally == self._site_wanted:
            return
        self._site_wanted = tally
        if self._site_writer is None or self._site_writer.done():
            self._site_writer = asyncio.create_task(self._write_site())

    async def _write_site(self) -> None:
        """Write the wanted count (one write for a burst of reconciles), again after a
        failure, until what is written is what is wanted."""
        failures = 0
        while self._site_wanted is not None and self._site_wanted != self._site_written:
            await asyncio.sleep(SITE_POLICY_SETTLE)
            wanted = self._site_wanted
            patch = merge_patch({"sitePolicy": self._site_written or {}}, {"sitePolicy": wanted})
            try:
                await patch_status(
                    self.api,
                    kind=kinds.Kind.ICHOR_INSTALLATION,
                    name=kinds.INSTALLATION_NAME,
                    namespace=None,
                    status_patch=patch,
                )
            except errors.NotFound:
                return  # no installation: nothing to count for
            except errors.FAILED as error:
                failures += 1
                logger.warning("status.sitePolicy of the IchorInstallation not written: %s", error)
                await asyncio.sleep(self.settings.backoff(failures))
                continue
            self._site_written = wanted

    async def _declare(
        self, key: Key, cluster: _Cluster, spec: TalosClusterSpec
    ) -> Decision | None:
        """Declarative mode: decide, and start the operation when one is due (once per
        spec generation and target: the webhook's rule refusing it, or its operation
        failing, stands until the spec changes; another refusal is tried again at the
        next check, a deferred start after the backoff). None in the Operations mode."""
        # a read that fails now: what was last seen may be stale, so nothing starts
        observation = cluster.observation if cluster.failure is None else None
        decided = decisions.decide(
            spec=spec,
            talos_nodes=observation.nodes.talos_versions if observation else None,
            kubernetes_nodes=observation.nodes.kubernetes_versions if observation else None,
            active=self.active_operations(key),
        )
        if decided is None or decided.start is None:
            return decided
        generation = bodies.generation(cluster.body)
        for stale in [k for k in cluster.declared if k[0] != generation]:
            del cluster.declared[stale]
        memo = (generation, decided.start.type.value, decided.start.version)
        known = cluster.declared.get(memo)
        if known is not None:
            return known
        try:
            result = await starting.start(self.api, cluster=cluster.body, target=decided.start)
        except starting.StartDeferred as error:
            cluster.deferrals += 1
            delay = self.settings.backoff(cluster.deferrals)
            logger.warning(
                "declarative start for %s/%s deferred (retry in %.0f s): %s", *key, delay, error
            )
            self.queue.add_after(key, delay)
            return Decision(
                SpecReachedReason.UPGRADING,
                f"{decided.start.sentence}: the start is tried again ({error})",
            )
        cluster.deferrals = 0
        # a refusal that is no rule's (``retry``) is tried again at the next check
        if result.reason in decisions.STALLED and not result.retry:
            cluster.declared[memo] = result
        return result

    async def _flush(self, key: Key, cluster: _Cluster, body: Mapping[str, Any]) -> bool:
        """Post the Events the stored status owes; False (retried after the backoff) when
        the API did not take them all."""
        try:
            written = await owing.flush(self.api, kind=kinds.Kind.TALOS_CLUSTER, body=body)
        except errors.NotFound:
            return False  # deleted meanwhile; the watch says so next
        except errors.FAILED as error:
            logger.warning("events of %s/%s not posted yet: %s", *key, error)
            self.queue.add_after(key, self.settings.backoff_initial)
            return False
        if owing.owes(written or body):
            self.queue.add_after(key, self.settings.backoff_initial)
        if written is not None and self.clusters.get(key) is cluster:
            cluster.body = bodies.without_managed_fields(written)
        return True

    async def _post(self, body: Mapping[str, Any], planned: Sequence[PlannedEvent]) -> None:
        involved = bodies.reference(body)
        for event in planned:
            await events.post(self.api, involved, event)

    async def _observe(
        self,
        cluster: _Cluster,
        source: SecretKey | None,
        account: ServiceAccount | Unnamed | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        cluster.source = source
        cluster.account = account
        try:
            if isinstance(account, Unnamed):
                raise _NotRead(account.message)  # no request at all
            # One deadline for the whole read, the Secret and the client included: it
            # bounds how long one cluster holds a worker, whatever its address does
            # (accepts and never answers, never finishes TLS, trickles its answer).
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
            async with asyncio.timeout(self.settings.observe_timeout):
                workload = await self._workload_client(source, account)
                observation = await observe(workload)
        except KubeconfigError as error:
            failure = Failure(ClusterReason.KUBECONFIG_UNUSABLE, str(error))
        except _NotRead as error:
            failure = Failure(ClusterReason.SERVICE_ACCOUNT_UNUSABLE, str(error))
        except ReadRefused as error:
            if isinstance(account, ServiceAccount):
                message = await refused_message(self.api, account, error)
                failure = Failure(ClusterReason.SERVICE_ACCOUNT_UNUSABLE, message)
            else:
                failure = Failure(ClusterReason.WORKLOAD_UNREACHABLE, _describe(error))
        except errors.FAILED as error:  # ssl.SSLError is an OSError
            failure = Failure(ClusterReason.WORKLOAD_UNREACHABLE, _describe(error))
        except Exception as error:
            # Whatever the workload cluster sent is data; an error no reader expected
            # must still reach the status, never leave the last Ready=True standing.
            logger.warning("observing the workload cluster failed", exc_info=True)
            failure = Failure(ClusterReason.NODE_VERSION_UNREADABLE, _unexpected(error))
        else:
            cluster.observation = observation
            cluster.failure = None
            cluster.failures = 0
            cluster.next_observe = loop.time() + self.settings.observe_interval
            return
        cluster.failure = failure
        cluster.failures += 1
        delay = self.settings.backoff(cluster.failures)
        cluster.next_observe = loop.time() + delay
        logger.info("workload cluster not read (retry in %.0f s): %s", delay, failure.message)

    async def health_gate(self, op: object, body: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
        """The cluster's own health checks now, for the executor between two nodes of a
        Talos operation: (name, passed, message) each; one failed entry when the workload
        cannot be asked."""
        meta: Mapping[str, Any] = body.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        cluster = self.clusters.get(key)
        workload = self._cached_workload(cluster) if cluster is not None else None
        if workload is None:
            return [("workload", False, "the workload cluster is not read yet")]
        try:
            verdicts = await self.autopatch.health_now(workload, body, self.installation_body)
        except TimeoutError:
            return [("workload", False, "its health checks did not answer in time")]
        return [(v.name, v.ok, v.message) for v in verdicts]

    def _cached_workload(self, cluster: _Cluster) -> ApiClient | None:
        """The client the last read of the workload cluster used (no request); without a
        kubeconfig Secret, the operator's client acting as the tenant's account, or None
        when no account may read."""
        if cluster.source is None:
            account = cluster.account
            return impersonating(self.api, account) if isinstance(account, ServiceAccount) else None
        cached = self._workload.get(cluster.source)
        return cached[1] if cached else None

    def _account(self, namespace: str, spec: TalosClusterSpec) -> ServiceAccount | Unnamed:
        """The account a cluster without a kubeconfig Secret is read as
        (``ichor.kube.accounts``): its spec's, the fleet's, or the namespace's default."""
        return accounts.choose(
            namespace=namespace,
            spec=spec.service_account_name,
            fleet=accounts.fleet_default(self.installation_body),
            required=self.tenants.require_service_account,
        )

    async def _workload_client(
        self, source: SecretKey | None, account: ServiceAccount | None
    ) -> ApiClient:
        if source is None:
            # the cluster the operator runs in, read as the tenant's account: never as
            # the operator, whose rights are the whole cluster's
            assert account is not None
            return impersonating(self.api, account)
        namespace, secret, key = source
        value = await read_secret_key(self.api, namespace=namespace, name=secret, key=key)
        cached = self._workload.get(source)
        if cached is not None and cached[0] == value.resource_version:
            return cached[1]
        workload = await client_from_kubeconfig(
            value.value,
            origin=f"the kubeconfig in key {key!r} of Secret {namespace}/{secret}",
            idle_seconds=WORKLOAD_IDLE_SECONDS,
            policy=self.credentials,
        )
        self._workload[source] = (value.resource_version, workload)
        if cached is not None:
            await cached[1].close()
        return workload


# --- reading a workload cluster ---------------------------------------------------------


#: The largest list answer (one page of Nodes) read from a workload cluster, and the JSON
#: values and nesting it may hold (``ichor.kube.untrusted``): a Node is about 15 KiB and
#: 400 values, so these take some 600 Nodes in one answer, and the parsed answer stays
#: within tens of MiB however the cluster fills it. A larger answer is unreadable, and
#: says so in the status.
MAX_LIST_BYTES = 16 * 1024 * 1024
MAX_LIST_VALUES = 300_000
MAX_LIST_DEPTH = 100
#: Nodes asked for per page of the Node list: 500 Nodes of 15 KiB and 400 values are
#: 7.5 MiB and 200,000 values, within one answer's bounds with room for larger Nodes.
NODE_PAGE = 500
#: Pages read at the most: 20 pages of 500 are 10,000 Nodes, twice what Kubernetes
#: supports in one cluster. A list that goes on is unreadable, and says so.
MAX_NODE_PAGES = 20
#: The longest continue token sent back (the API server's are a few hundred bytes).
MAX_CONTINUE = 4096
#: Bytes of a refusal's body kept for its message.
MAX_ERROR_BODY = 64 * 1024


async def _read_bounded(response: Any, *, limit: int) -> bytes | None:
    """The body of ``response`` (aiohttp's), or None once it is declared or grows past
    ``limit`` (the rest is left unread)."""
    length = response.content_length
    if length is not None and length > limit:
        return None
    return await read_within(response.content, limit=limit)


async def _get_json(method: Any, *args: Any, **params: Any) -> object:
    """The JSON a list call returns, or None when the body is not JSON the reader takes
    within ``MAX_LIST_BYTES``, ``MAX_LIST_VALUES`` and ``MAX_LIST_DEPTH``. An answer that
    is not a success raises its typed error (``ichor.kube.errors``), as the client does
    when it reads the body itself: a 401's body is the refusal, not data."""
    params.update(_request_timeout=REQUEST_TIMEOUT)
    response = await method(*args, **params)
    try:
        if not 200 <= response.status <= 299:
            said = await _read_bounded(response, limit=MAX_ERROR_BODY)
            raise errors.answered(response.status, response.reason, said or b"")
        body = await _read_bounded(response, limit=MAX_LIST_BYTES)
    finally:
        response.release()
    if body is None:
        logger.warning("a workload list answer over %s bytes was not read", f"{MAX_LIST_BYTES:,}")
        return None
    payload, problem = untrusted.loads(
        body, max_bytes=MAX_LIST_BYTES, max_values=MAX_LIST_VALUES, max_depth=MAX_LIST_DEPTH
    )
    if problem is not None:
        logger.warning("a workload list answer was not read: %s", problem)
        return None
    return payload


async def observe(api: ApiClient) -> Observation:
    """Read the Nodes and the CNI of the workload cluster behind ``api``.

    Raises the client's errors (ApiException, aiohttp errors, timeouts) for the caller to
    turn into a condition, a 403 as ``ReadRefused`` naming the read; whatever the cluster
    answers is read as data, never raised: an unreadable Node list or Node is named in
    ``nodes.unreadable``, an unreadable CNI version is None. Each call marked "workload
    read" runs on ``api``, the workload's client: a kubeconfig's, or the tenant's account
    (tests/unit/chart/apicalls.py keeps them out of the operator's own ClusterRole).
    """
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    with refusal(accounts.NODES):
        nodes = await _observe_nodes(core)
    with refusal(accounts.DAEMONSETS):
        listed = await _get_json(
            apps.list_daemon_set_for_all_namespaces_without_preload_content  # workload read
        )
    daemonsets = _items(listed) or []
    cni = cni_observation(daemonsets)
    if cni.detected == DETECTED_CILIUM and cni.version is None:
        namespace = cilium_namespace(daemonsets)
        try:
            secrets = await _get_json(
                core.list_namespaced_secret_without_preload_content,  # workload read
                namespace,
                label_selector="owner=helm,name=cilium,status=deployed",
            )
        except errors.Forbidden:
            # Secrets of Cilium's namespace are rarely a tenant's to read, nor should be:
            # the release stays unknown (CiliumVersionUnreadable), the Nodes are read
            logger.info("Cilium's Helm release in %s may not be listed: its version is unknown",
                        namespace)  # fmt: skip
            secrets = None
        cni = cni_observation(daemonsets, _items(secrets) or [])
    return Observation(nodes=nodes, cni=cni)


async def _observe_nodes(core: client.CoreV1Api) -> NodesObservation:
    """The Nodes, listed in pages of ``NODE_PAGE`` (each answer within the bounds of
    ``_get_json``) and counted page by page (``NodesTally``), so no page is kept once
    counted: the Nodes of a large cluster are read whole, and memory stays that of one
    page. A page that cannot be read makes the whole list unreadable."""
    tally = NodesTally()
    token = ""
    for _ in range(MAX_NODE_PAGES):
        paging: dict[str, Any] = {"limit": NODE_PAGE}
        if token:
            paging["_continue"] = token
        page = await _get_json(core.list_node_without_preload_content, **paging)  # workload read
        items = _items(page)
        if items is None:
            return unreadable_nodes("the answer is not a JSON object with a list of items")
        for node in items:
            tally.add(node)
        following = _continue_token(page)
        if following is None:
            return unreadable_nodes("a page names no usable continue token")
        if not following:
            return tally.observation()
        token = following
    return unreadable_nodes(f"it goes on past {MAX_NODE_PAGES * NODE_PAGE:,} Nodes")


def _continue_token(page: object) -> str | None:
    """The continue token of a list page ("": the last page), or None when it is not
    one the reader sends back (not text, or longer than ``MAX_CONTINUE``)."""
    metadata = page.get("metadata") if isinstance(page, Mapping) else None
    token = metadata.get("continue") if isinstance(metadata, Mapping) else None
    if token is None:
        return ""
    if not isinstance(token, str) or len(token) > MAX_CONTINUE:
        return None
    return token


def _with_auto(
    status: TalosClusterStatus,
    auto: autopatch.Result | None,
    *,
    generation: int | None,
    now: datetime,
) -> TalosClusterStatus:
    """The status with auto-patch's part merged in (``status.autoPatch`` and its
    condition), under the same clock; as it is when auto-patch was not asked."""
    if auto is None:
        return status
    return with_auto_patch(
        status,
        auto_patch=auto.status,
        condition=auto.condition,
        generation=generation,
        now=now,
    )
