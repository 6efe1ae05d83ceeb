"""``ichor version``, ``ichor init``, ``ichor adopt`` and ``ichor status``.

``init`` writes a TalosCluster with the release set of this build and nothing else: a
different version is an upgrade, run after the install (``release.release_set``). ``adopt``
reads what a running cluster runs (its Nodes' ``osImage`` and ``kubeletVersion``, and the
Cilium DaemonSet) and refuses, before writing anything, a cluster Ichor cannot operate;
an incompatible pair is adopted with a warning. Both leave the compatibility decision to
``ichor.release`` and the final word on a write to the admission webhook.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from ichor.api import kinds, records
from ichor.api.taloscluster import DEFAULT_KUBECONFIG_KEY, CNIPreset
from ichor.cli import common, kube, output, views
from ichor.kube import credentials
from ichor.release import observed, release_set
from ichor.release.observed import Unreadable
from ichor.release.refusals import Refusal
from ichor.release.versions import Version, VersionError, parse
from ichor.settings import CredentialSettings

_OS_IMAGE = re.compile(r"^Talos \((?P<version>[^()\s]+)\)$")


def _secret_ref(name: str | None) -> dict[str, str] | None:
    return {"name": name} if name else None


def cluster_body(
    name: str,
    *,
    talos: str,
    kubernetes: str,
    contract: str,
    cni: str,
    talosconfig_secret: str | None,
    kubeconfig_secret: str | None,
    schematic: str | None,
    adoption: bool = False,
) -> dict[str, Any]:
    """The TalosCluster to create; ``adoption`` marks the create as an adoption (the
    webhook then takes an incompatible pair as it runs, with a warning and an Event)."""
    spec: dict[str, Any] = {
        "talosVersion": talos,
        "kubernetesVersion": kubernetes,
        "versionContract": contract,
        "cni": {"preset": cni},
    }
    for key, value in (
        ("talosconfigSecretRef", _secret_ref(talosconfig_secret)),
        ("kubeconfigSecretRef", _secret_ref(kubeconfig_secret)),
        ("schematic", schematic),
    ):
        if value is not None:
            spec[key] = value
    metadata: dict[str, Any] = {"name": name}
    if adoption:
        metadata["annotations"] = {records.ADOPTION: "true"}
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER.value,
        "metadata": metadata,
        "spec": spec,
    }


def _write_cluster(target: kube.Target, body: dict[str, Any], *, dry_run: bool) -> list[str]:
    try:
        _, warnings = kube.create(target, kinds.Plural.TALOS_CLUSTERS, body, dry_run=dry_run)
    except kube.Denied as denial:
        common.refused(denial.message)
    for warning in warnings:
        common.warn(warning)
    return warnings


_CNI = click.Choice([preset.value for preset in CNIPreset])


_Command = TypeVar("_Command", bound=Callable[..., Any])


def _writes_cluster(*, dry_run: str) -> Callable[[_Command], _Command]:
    """The last options of a command that writes a TalosCluster: ``--schematic``,
    ``--dry-run`` (``dry_run`` says what it does), the connection options, then the
    click context."""

    def decorate(command: _Command) -> _Command:
        decorated: Callable[..., Any] = click.pass_context(command)
        decorated = common.connection_options(decorated)
        decorated = click.option("--dry-run", is_flag=True, help=dry_run)(decorated)
        decorated = click.option(
            "--schematic", help="Image Factory schematic ID of the installer."
        )(decorated)
        return cast("_Command", decorated)

    return decorate


@click.command()
@click.argument("name")
@click.option(
    "--talos-version",
    default=release_set.PINNED.talos,
    show_default=True,
    help="Talos of the first install: the release set's, and no other.",
)
@click.option(
    "--kubernetes-version",
    default=release_set.PINNED.kubernetes,
    show_default=True,
    help="Kubernetes of the first install: the release set's, and no other.",
)
@click.option(
    "--version-contract",
    default=release_set.PINNED.contract,
    show_default=True,
    help="Version contract of the first install: the release set's, and no other.",
)
@click.option("--cni", type=_CNI, default=CNIPreset.CILIUM.value, show_default=True)
@click.option("--talosconfig-secret", help="Secret (key talosconfig) the executors mount.")
@click.option("--kubeconfig-secret", help="Secret (key kubeconfig) of the workload cluster.")
@_writes_cluster(dry_run="Ask the server, write nothing.")
def init(
    ctx: click.Context,
    name: str,
    talos_version: str,
    kubernetes_version: str,
    version_contract: str,
    cni: str,
    talosconfig_secret: str | None,
    kubeconfig_secret: str | None,
    schematic: str | None,
    dry_run: bool,
) -> None:
    """Write a TalosCluster NAME for a first install, with this build's release set."""
    refusal = (
        release_set.check_pinned_flags(
            talos=talos_version, kubernetes=kubernetes_version, contract=version_contract
        )
        or release_set.check_init_compat()
    )
    if refusal is not None:
        common.refused(refusal.message)
    target = common.target(ctx)
    body = cluster_body(
        name,
        talos=talos_version,
        kubernetes=kubernetes_version,
        contract=version_contract,
        cni=cni,
        talosconfig_secret=talosconfig_secret,
        kubeconfig_secret=kubeconfig_secret,
        schematic=schematic,
    )
    _write_cluster(target, body, dry_run=dry_run)
    done = "would be written (dry run, nothing written)" if dry_run else "created"
    click.echo(
        f"TalosCluster {target.namespace}/{name} {done}: {release_set.PINNED}."
        + ("" if dry_run else " Follow it with: ichor status " + name)
    )


# --- adopt --------------------------------------------------------------------------------


def _plain(api: client.ApiClient, model: object) -> dict[str, Any]:
    """A client model as the JSON the API sent."""
    plain = api.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    return cast(dict[str, Any], plain)


def _workload_nodes(api: client.ApiClient, where: str) -> list[dict[str, Any]]:
    core = client.CoreV1Api(api)
    listed = kube.call(
        kube.Target(api=api, namespace="", server=where),
        "reading the Nodes of the cluster to adopt",
        lambda: core.list_node(_request_timeout=kube.REQUEST_TIMEOUT),
    )
    return list(_plain(api, listed).get("items") or [])


def _workload_cilium(api: client.ApiClient, where: str) -> str | Unreadable | None:
    """The Cilium release the agent DaemonSet's image names, if one runs: ``"unknown"``
    when only its deployed Helm release can name it (the operator reads that), and
    ``Unreadable`` when neither can."""
    apps = client.AppsV1Api(api)
    listed = kube.call(
        kube.Target(api=api, namespace="", server=where),
        "reading the DaemonSets of the cluster to adopt",
        lambda: apps.list_daemon_set_for_all_namespaces(_request_timeout=kube.REQUEST_TIMEOUT),
    )
    body = _plain(api, listed)
    for item in body.get("items") or []:
        if (item.get("metadata") or {}).get("name") != "cilium":
            continue
        containers = ((item.get("spec") or {}).get("template") or {}).get("spec", {})
        for container in containers.get("containers") or []:
            image = str(container.get("image") or "")
            tag = image.split("@", 1)[0].rpartition(":")[2]
            try:
                parse(tag)
            except VersionError:
                continue
            return tag.removeprefix("v")
        namespace = str((item.get("metadata") or {}).get("namespace") or "kube-system")
        if _helm_releases(api, where, namespace):
            return "unknown"
        return Unreadable(
            what=f"Cilium is running (DaemonSet {namespace}/cilium) but its release cannot "
            f"be read: its image names no release and no deployed Helm release names its chart",
            step=observed.CILIUM_STEP,
        )
    return None


def _helm_releases(api: client.ApiClient, where: str, namespace: str) -> int:
    """How many deployed Helm release Secrets of ``cilium`` ``namespace`` holds (none
    when they cannot be listed)."""
    core = client.CoreV1Api(api)
    try:
        listed = kube.call(
            kube.Target(api=api, namespace=namespace, server=where),
            "reading the Helm releases of Cilium",
            lambda: core.list_namespaced_secret(
                namespace,
                label_selector="owner=helm,name=cilium,status=deployed",
                _request_timeout=kube.REQUEST_TIMEOUT,
            ),
        )
    except (kube.CliError, kube.Denied):
        return 0
    return len(_plain(api, listed).get("items") or [])


def _lowest(versions: list[Version]) -> Version:
    return min(versions)


def adopt_versions(nodes: list[dict[str, Any]]) -> tuple[Version, Version, list[str]]:
    """The lowest Talos and Kubernetes the Nodes run, and a note per odd Node.

    Raises ``ValueError`` with a sentence when no Node says what it runs.
    """
    talos: list[Version] = []
    kubernetes: list[Version] = []
    notes: list[str] = []
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "?")
        info = (node.get("status") or {}).get("nodeInfo") or {}
        image = str(info.get("osImage") or "")
        match = _OS_IMAGE.match(image)
        try:
            if match is None:
                raise VersionError(image, expected='"Talos (vX.Y.Z)"')
            talos.append(parse(match["version"]))
        except VersionError:
            notes.append(f'Node {name} runs osImage "{image}", not Talos')
        try:
            kubernetes.append(parse(str(info.get("kubeletVersion") or "")))
        except VersionError:
            notes.append(f"Node {name} reports no readable kubeletVersion")
    if not nodes:
        raise ValueError("the cluster has no Nodes, so there is nothing to adopt")
    if notes:
        raise ValueError("; ".join(notes))
    if len(set(talos)) > 1 or len(set(kubernetes)) > 1:
        notes.append(
            "the Nodes run different versions (an upgrade half done?); the lowest are adopted"
        )
    return _lowest(talos), _lowest(kubernetes), notes


#: What Talos writes on its Node (internal/app/machined/pkg/controllers/k8s): the
#: schematic ID as an annotation, each extension's version as a label under this prefix.
_EXTENSIONS = "extensions.talos.dev/"


def adopt_images(nodes: list[dict[str, Any]]) -> list[str]:
    """One line per group of Nodes that show the same schematic and extensions (what
    Talos writes on its Node), largest first: what adopt finds before the Talos API is
    read."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        schematic = str(annotations.get(f"{_EXTENSIONS}schematic") or "")
        extensions = tuple(
            sorted(
                str(k).removeprefix(_EXTENSIONS)
                for k in [*labels, *annotations]
                if str(k).startswith(_EXTENSIONS) and k != f"{_EXTENSIONS}schematic"
            )
        )
        groups.setdefault((schematic, extensions), []).append(str(meta.get("name", "?")))
    lines = []
    for (schematic, extensions), names in sorted(groups.items(), key=lambda i: -len(i[1])):
        shown = f"schematic {schematic[:12]}" if schematic else "no schematic annotation"
        what = ", ".join(extensions) or "no extensions"
        lines.append(f"{shown} ({what}): {', '.join(sorted(names))}")
    return lines


def _no_workload_kubeconfig(ctx: click.Context) -> str:
    """The refusal of an adopt without ``--workload-kubeconfig``: it names the old spelling
    when ``--kubeconfig`` came after the command, where it once named the cluster to adopt."""
    source = ctx.get_parameter_source("kubeconfig")
    if source is click.core.ParameterSource.COMMANDLINE:
        return (
            "--kubeconfig names the management cluster, as on every ichor command (and as "
            "kubectl's does); give the kubeconfig of the cluster to adopt with "
            "--workload-kubeconfig FILE (and its context with --workload-context)"
        )
    return "Missing option '--workload-kubeconfig': the kubeconfig of the running cluster to adopt"


@click.command()
@click.argument("name")
@click.option(
    "--workload-kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig of the running cluster to adopt (stored in Secret NAME-kubeconfig). Required.",
)
@click.option("--workload-context", help="Context of that kubeconfig to use.")
@click.option(
    "--cni-unmanaged",
    is_flag=True,
    help="The cluster keeps its own CNI: Ichor installs no Cilium and judges only the "
    "Talos/Kubernetes pair.",
)
@click.option(
    "--version-contract",
    help="Version contract to record (vX.Y): any the running Talos supports, its own minor "
    "or older. Default: probed from the running Talos.",
)
@click.option("--talosconfig-secret", help="Secret (key talosconfig) the executors mount.")
@_writes_cluster(dry_run="Judge and ask the server, write nothing.")
def adopt(
    ctx: click.Context,
    name: str,
    workload_kubeconfig: str | None,
    workload_context: str | None,
    cni_unmanaged: bool,
    version_contract: str | None,
    talosconfig_secret: str | None,
    schematic: str | None,
    dry_run: bool,
) -> None:
    """Take over a running Talos cluster as TalosCluster NAME, at the versions it runs.

    --workload-kubeconfig (and --workload-context) name the running cluster to adopt;
    --kubeconfig, --context and -n name the management cluster, as on every command.
    """
    if workload_kubeconfig is None:
        raise click.UsageError(_no_workload_kubeconfig(ctx), ctx)
    path = Path(workload_kubeconfig)
    workload = _workload_client(path, workload_context)
    where = str(workload.configuration.host)
    found_nodes = _workload_nodes(workload, where)
    talos, kubernetes, notes = _adopted_versions(name, found_nodes)
    cilium = _workload_cilium(workload, where)
    _say_running(where, talos=talos, kubernetes=kubernetes, cilium=cilium)
    _refuse_unreadable_cilium(name, cilium, cni_unmanaged=cni_unmanaged)
    for note in notes:
        common.warn(note)
    _show_images(found_nodes, schematic=schematic)
    contract = _adopted_contract(
        talos, kubernetes, version_contract=version_contract, cni_unmanaged=cni_unmanaged
    )
    stored = _stored_kubeconfig(path, workload_context)
    target = common.target(ctx)
    secret = f"{name}-kubeconfig"
    body = cluster_body(
        name,
        talos=talos.tag,
        kubernetes=kubernetes.tag,
        contract=contract,
        cni=(CNIPreset.UNMANAGED if cni_unmanaged else CNIPreset.CILIUM).value,
        talosconfig_secret=talosconfig_secret,
        kubeconfig_secret=secret,
        schematic=schematic,
        adoption=True,
    )
    _write_cluster(target, body, dry_run=True)
    if dry_run:
        click.echo(f"TalosCluster {target.namespace}/{name} would be adopted (dry run).")
        return
    _create_kubeconfig_secret(target, secret, stored)
    _write_cluster(target, body, dry_run=False)
    click.echo(
        f"TalosCluster {target.namespace}/{name} adopted at Talos {talos.tag}, Kubernetes "
        f"{kubernetes.tag}, contract {body['spec']['versionContract']}, CNI "
        f"{body['spec']['cni']['preset']} (kubeconfig in Secret {secret})."
    )


def _workload_client(path: Path, context: str | None) -> client.ApiClient:
    """The API client of the cluster to adopt, from its kubeconfig (refused when the file
    cannot be used)."""
    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call,no-any-return]
            config_file=str(path), context=context
        )
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise kube.CliError(
            f"the kubeconfig {path} cannot be used: it is not YAML{where}; "
            "give the kubeconfig of the cluster to adopt"
        ) from None
    except (TypeError, AttributeError):
        raise kube.CliError(
            f"the kubeconfig {path} cannot be used: it is not a kubeconfig (a YAML map of "
            "clusters, contexts and users); give the kubeconfig of the cluster to adopt"
        ) from None
    except (ConfigException, OSError, ValueError) as error:
        raise kube.CliError(f"the kubeconfig {path} cannot be used: {error}") from None


def _adopted_versions(name: str, nodes: list[dict[str, Any]]) -> tuple[Version, Version, list[str]]:
    """The Talos and Kubernetes the Nodes run, and the notes on them; the adopt is
    refused when the Nodes do not say one of each."""
    try:
        return adopt_versions(nodes)
    except ValueError as error:
        common.refused(f"Adopt of {name} is refused: {error}.")


def _say_running(
    where: str, *, talos: Version, kubernetes: Version, cilium: str | Unreadable | None
) -> None:
    """What the cluster to adopt runs, in one sentence."""
    if isinstance(cilium, Unreadable):
        running = ", Cilium (release not readable)"
    else:
        running = f", Cilium {cilium}" if cilium else ", no Cilium"
    click.echo(
        f"The cluster at {where} runs Talos {talos.tag}, Kubernetes {kubernetes.tag}{running}."
    )


def _refuse_unreadable_cilium(
    name: str, cilium: str | Unreadable | None, *, cni_unmanaged: bool
) -> None:
    """A managed adopt takes the running Cilium over, which the preset rule refuses for a
    release it cannot read (UnreadableVersion): no Kubernetes step could follow."""
    if not isinstance(cilium, Unreadable) or cni_unmanaged:
        return
    common.refused(
        cilium.refusal(f"Adopt of {name} with spec.cni.preset cilium").message
        + " Or adopt with --cni-unmanaged to keep the CNI yours. Nothing was written."
    )


def _show_images(nodes: list[dict[str, Any]], *, schematic: str | None) -> None:
    """The images the Nodes run (each keeps its own), and what ``--schematic`` changes."""
    images = adopt_images(nodes)
    click.echo("The Nodes show (each is upgraded to the image it runs):")
    for line in images:
        click.echo(f"  {line}")
    if len(images) > 1:
        common.warn(
            f"the Nodes run {len(images)} different schematics or extension sets: each "
            f"keeps its own at a Talos upgrade; the operator reads each node's platform and "
            f"SecureBoot through the Talos API (status.nodeImages, ichor status)"
        )
    if schematic:
        common.warn(
            f"--schematic {schematic[:12]} sets spec.schematic: every node installs it at the "
            f"next Talos upgrade, and one it would drop a known extension from is refused; "
            f"leave it out to keep each node's own"
        )


def _adopted_contract(
    talos: Version, kubernetes: Version, *, version_contract: str | None, cni_unmanaged: bool
) -> str:
    """The version contract to record, once the running versions may be adopted; the
    adopt is refused otherwise, and told what the check warns of."""
    verdict = release_set.check_adopt_compat(
        talos=talos.tag, kubernetes=kubernetes.tag, managed_cni=not cni_unmanaged
    )
    if verdict.refusal is not None:
        common.refused(verdict.refusal.message + " Nothing was written.")
    contract = release_set.adopt_contract(contract=version_contract, talos=talos)
    if isinstance(contract, Refusal):
        common.refused(contract.message + " Nothing was written.")
    for warning in verdict.warnings:
        common.warn(warning)
    return contract


def _create_kubeconfig_secret(target: kube.Target, secret: str, stored: bytes) -> None:
    """The Secret that holds the stored kubeconfig, created before the TalosCluster."""
    secret_body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "labels": {"app.kubernetes.io/managed-by": "ichor"}},
        "type": "Opaque",
        "data": {DEFAULT_KUBECONFIG_KEY: base64.b64encode(stored).decode("ascii")},
    }
    kube.call(
        target,
        f"writing Secret {target.namespace}/{secret}",
        lambda: target.core.create_namespaced_secret(
            target.namespace,
            secret_body,  # type: ignore[arg-type]
            _request_timeout=kube.REQUEST_TIMEOUT,
        ),
    )


#: The fields of a kubeconfig that name a file, and the field that holds its content.
_INLINED = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def _stored_kubeconfig(path: Path, context: str | None) -> bytes:
    """What adopt stores of a kubeconfig: the one context it used, with its cluster and
    user, files inlined, as ``kubectl config view --minify --flatten`` writes it; then
    read as the operator will read it (``ichor.kube.credentials``), so a kubeconfig the
    operator would refuse (an ``exec`` user, a ``tokenFile``) is refused here, before
    anything is written. Proxy and insecure TLS are left to the operator's settings."""
    what = f"the kubeconfig {path}"
    ctx, cluster, user = _context_entries(path, context, what=what)
    _inline_files(path, cluster, "cluster", what=what)
    _inline_files(path, user, "user", what=what)
    minified = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [user],
        "contexts": [ctx],
        "current-context": ctx["name"],
    }
    text = yaml.safe_dump(minified, sort_keys=False).encode()
    try:
        credentials.read_kubeconfig(
            text, what=what, policy=CredentialSettings(allow_proxy=True, allow_insecure_tls=True)
        )
    except credentials.Refused as error:
        common.refused(f"{error}. Nothing was written.")
    return text


def _context_entries(path: Path, context: str | None, *, what: str) -> tuple[Any, Any, Any]:
    """The context (``context``, else the current one) of the kubeconfig ``path``, and the
    one cluster and one user it names; an error naming the context otherwise."""
    try:
        whole: Any = yaml.safe_load(path.read_text())
        chosen = context or whole["current-context"]
        (ctx,) = [c for c in whole["contexts"] if c["name"] == chosen]
        (cluster,) = [c for c in whole["clusters"] if c["name"] == ctx["context"]["cluster"]]
        (user,) = [u for u in whole["users"] if u["name"] == ctx["context"]["user"]]
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
        raise kube.CliError(
            f"{what} cannot be stored: its context {context or '(current)'} does not name "
            "one cluster and one user"
        ) from None
    return ctx, cluster, user


def _inline_files(path: Path, entry: Any, part: str, *, what: str) -> None:
    """Replace each file ``entry[part]`` names (``_INLINED``, relative to the kubeconfig's
    folder) by its content, base64-encoded, as ``--flatten`` does."""
    fields = entry.get(part) or {}
    for file_field, data_field in _INLINED.items():
        if isinstance(fields.get(file_field), str):
            named = path.parent / fields.pop(file_field)
            try:
                fields[data_field] = base64.b64encode(named.read_bytes()).decode()
            except OSError as error:
                raise kube.CliError(f"{what}: {file_field} {named}: {error}") from None


# --- status -------------------------------------------------------------------------------


@click.command()
@output.listing("Clusters")
def status(ctx: click.Context, cluster: str | None, all_namespaces: bool, fmt: str) -> None:
    """One table of clusters: versions, compatibility and the default upgrades."""
    target = common.target(ctx)
    if cluster is not None:
        bodies = [kube.get_cluster(target, cluster)]
    else:
        bodies = kube.list_clusters(target, all_namespaces=all_namespaces)
    rows = views.status_rows(bodies)
    if output.emitted(rows, fmt):
        return
    output.status_table(rows, namespaces=all_namespaces)
