"""The CLI's connection to the cluster Ichor runs in, found like kubectl finds it.

``--kubeconfig``, ``--context``, ``-n``, ``--as`` and ``--as-group`` as kubectl reads them
(the kubeconfig user's ``as:`` too), with the synchronous ``kubernetes`` client loaded on
the first connection only. Every failure of the API becomes ``CliError`` with one
sentence; a denial by Ichor's webhook is kept apart (``Denied``): a refusal of the rules,
exit code 1, with the ``--override`` hint where the server says an override would pass.

More in docs/design/notes.md, "ichor/cli/kube.py".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ichor.api import kinds
from ichor.kube import apistatus

if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

#: Seconds one API call may take before the CLI gives up with a sentence.
REQUEST_TIMEOUT = 15.0

_DENIED = re.compile(
    r'^admission webhook "(?P<hook>[^"]+)" denied the request: (?P<message>.*)$', re.S
)
_WARNING = re.compile(r'\d{3} [^ ]+ "((?:[^"\\]|\\.)*)"')


class CliError(click.ClickException):
    """A failure the user can act on, shown as one sentence; exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True, file=file)


class Denied(Exception):
    """Ichor's admission webhook refused the write; ``message`` is its sentence."""

    def __init__(self, message: str, *, webhook: str, overridable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.webhook = webhook
        #: The webhook names ``override: true`` (with the verb) as passing this refusal
        #: (``kinds.OVERRIDE_WOULD_PASS`` among the Status's causes).
        self.overridable = overridable


@dataclass(frozen=True)
class Target:
    """Where the CLI talks to: the client, the namespace, the server for messages."""

    api: client.ApiClient
    namespace: str
    server: str

    @property
    def custom(self) -> client.CustomObjectsApi:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        from kubernetes import client

        return client.BatchV1Api(self.api)


class _Impersonating:
    """urllib3's pool manager with kubectl's impersonation headers on every request:
    ``Impersonate-User`` and one ``Impersonate-Group`` line per group (the client's own
    default headers are a plain dict, which holds one value per name)."""

    def __init__(self, pool: Any, *, user: str, groups: Sequence[str]) -> None:
        self._pool = pool
        self._user = user
        self._groups = tuple(groups)

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        import urllib3

        headers = urllib3.HTTPHeaderDict(kwargs.get("headers") or {})
        headers["Impersonate-User"] = self._user
        for group in self._groups:
            headers.add("Impersonate-Group", group)
        kwargs["headers"] = headers
        return self._pool.request(method, url, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def impersonate(api: client.ApiClient, *, user: str, groups: Sequence[str] = ()) -> None:
    """Make every call of ``api`` impersonate ``user`` (and ``groups``)."""
    rest = api.rest_client
    rest.pool_manager = _Impersonating(rest.pool_manager, user=user, groups=groups)  # type: ignore[assignment]


def kubeconfig_impersonation(
    path: str | None, context: str | None
) -> tuple[str | None, tuple[str, ...]]:
    """The ``as:`` and ``as-groups:`` of the kubeconfig user the context names, as kubectl
    reads them (None and () when it names none)."""
    from kubernetes.config.kube_config import (
        KUBE_CONFIG_DEFAULT_LOCATION,
        KubeConfigLoader,
        KubeConfigMerger,
    )

    merged = KubeConfigMerger(path or KUBE_CONFIG_DEFAULT_LOCATION).config  # type: ignore[no-untyped-call]
    loader = KubeConfigLoader(config_dict=merged, active_context=context)  # type: ignore[no-untyped-call]
    user = getattr(loader, "_user", None)
    value = getattr(user, "value", None)
    if not isinstance(value, Mapping):
        return None, ()
    name = value.get("as")
    groups = value.get("as-groups") or ()
    return (str(name) if name else None), tuple(str(g) for g in groups)


def connect(
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    as_user: str | None = None,
    as_groups: Sequence[str] = (),
) -> Target:
    """A client for the chosen kubeconfig (None: ``~/.kube/config``) and context, and the
    namespace to use; every call impersonates ``as_user`` (and ``as_groups``) when given."""
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig or None
    try:
        api = config.new_client_from_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
        contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        if not as_user:
            # kubectl honours the kubeconfig user's `as:`/`as-groups:`; the Python client
            # ignores them and would act with the credentials alone
            as_user, as_groups = kubeconfig_impersonation(path, context)
    except (ConfigException, OSError, TypeError, ValueError) as error:
        where = path or "~/.kube/config"
        raise CliError(f"the kubeconfig {where} cannot be used: {error}") from None
    if as_user:
        impersonate(api, user=as_user, groups=as_groups)
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), active)
    default_namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    return Target(
        api=api,
        namespace=namespace or default_namespace,
        server=str(api.configuration.host),
    )


def api_message(error: ApiException) -> str:
    """The API server's own sentence for a failed call (its Status message)."""
    return apistatus.read(error.body, status=error.status, reason=error.reason).message


def failure(error: ApiException, *, what: str) -> Exception:
    """``Denied`` for a refusal of Ichor's webhook, else a ``CliError`` naming ``what``."""
    answer = apistatus.read(error.body, status=error.status, reason=error.reason)
    denied = _DENIED.match(answer.message)
    if denied is not None and denied["hook"].endswith(f".{kinds.GROUP}"):
        return Denied(
            denied["message"],
            webhook=denied["hook"],
            overridable=kinds.OVERRIDE_WOULD_PASS in answer.causes,
        )
    return CliError(f"{what} failed: {answer.message}")


def call(target: Target, what: str, fn: Callable[[], T]) -> T:
    """Run one API call; a failure becomes ``Denied`` (the webhook) or ``CliError``."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        return fn()
    except ApiException as error:
        raise failure(error, what=what) from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise CliError(
            f"{what} failed: the API server at {target.server} cannot be reached ({error})"
        ) from None


def warnings_of(headers: Any) -> list[str]:
    """The admission warnings of a response (``Warning: 299 - "text"`` headers)."""
    if headers is None:
        return []
    values: list[str]
    getlist = getattr(headers, "getlist", None)
    if callable(getlist):
        values = [str(v) for v in getlist("Warning")]
    else:
        single = headers.get("Warning") if hasattr(headers, "get") else None
        values = [str(single)] if single else []
    found: list[str] = []
    for value in values:
        for match in _WARNING.finditer(value):
            found.append(match[1].replace('\\"', '"').replace("\\\\", "\\"))
    return found


def get_cluster(target: Target, name: str) -> dict[str, Any]:
    """The TalosCluster ``name`` in the target namespace; a missing one is a CliError."""
    return _get_own(target, kinds.Kind.TALOS_CLUSTER, name)


#: The command that lists each of Ichor's namespaced kinds, and what it calls them.
_LISTED_BY: dict[kinds.Kind, tuple[str, str]] = {
    kinds.Kind.TALOS_CLUSTER: ("ichor status", "clusters"),
    kinds.Kind.TALOS_OPERATION: ("ichor operations", "operations"),
}


def _get_own(target: Target, kind: kinds.Kind, name: str) -> dict[str, Any]:
    """The object ``name`` of one of Ichor's kinds in the target namespace; a missing one
    is a CliError naming the command that lists them there (``_LISTED_BY``)."""
    found = find_own(target, kind, name)
    if found is None:
        lister, called = _LISTED_BY[kind]
        raise CliError(
            f"{kind} {target.namespace}/{name} does not exist "
            f"({lister} -n {target.namespace} lists the {called} there)"
        )
    return found


def find_own(target: Target, kind: kinds.Kind, name: str) -> dict[str, Any] | None:
    """The object ``name`` of one of Ichor's namespaced kinds in the target namespace, or
    None when there is none."""
    plural = kinds.PLURALS[kind]

    def read() -> dict[str, Any]:
        return cast(
            dict[str, Any],
            target.custom.get_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                target.namespace,
                plural,
                name,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )

    return call(target, f"reading {kind} {target.namespace}/{name}", _or_none(read))


def list_clusters(target: Target, *, all_namespaces: bool) -> list[dict[str, Any]]:
    """The TalosClusters of the target namespace (or of every namespace)."""
    return _list_own(target, kinds.Kind.TALOS_CLUSTER, all_namespaces=all_namespaces)


def _list_own(target: Target, kind: kinds.Kind, *, all_namespaces: bool) -> list[dict[str, Any]]:
    """The objects of one of Ichor's kinds in the target namespace, or in every one."""
    plural = kinds.PLURALS[kind]

    def read() -> list[dict[str, Any]]:
        if all_namespaces:
            found = target.custom.list_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                plural,
                _request_timeout=REQUEST_TIMEOUT,
            )
        else:
            found = target.custom.list_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                target.namespace,
                plural,
                _request_timeout=REQUEST_TIMEOUT,
            )
        return list(cast(dict[str, Any], found).get("items") or [])

    return call(target, f"listing {kind}s", read)


def get_installation(target: Target) -> dict[str, Any] | None:
    """The IchorInstallation singleton, or None when there is none."""

    def read() -> dict[str, Any]:
        return cast(
            dict[str, Any],
            target.custom.get_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )

    return call(target, "reading the IchorInstallation", _or_none(read))


def _or_none(read: Callable[[], T]) -> Callable[[], T | None]:
    """``read``, answering None for a 404."""

    from kubernetes.client.exceptions import ApiException

    def reading() -> T | None:
        try:
            return read()
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    return reading


def create(
    target: Target, plural: kinds.Plural, body: Mapping[str, Any], *, dry_run: bool
) -> tuple[dict[str, Any], list[str]]:
    """Create one of Ichor's namespaced objects (a server-side dry run when asked);
    returns the object as the server answered and the admission warnings."""
    kind = body.get("kind", plural.value)

    def write() -> tuple[dict[str, Any], list[str]]:
        params: dict[str, Any] = {"_request_timeout": REQUEST_TIMEOUT}
        if dry_run:
            params["dry_run"] = "All"
        data, _, headers = target.custom.create_namespaced_custom_object_with_http_info(
            kinds.GROUP, kinds.VERSION, target.namespace, plural.value, dict(body), **params
        )
        return cast(dict[str, Any], data), warnings_of(headers)

    verb = "planning" if dry_run else "creating"
    return call(target, f"{verb} the {kind}", write)


def patch_cluster(target: Target, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge-patch the TalosCluster ``name`` (judged by the webhook like any update)."""

    def write() -> dict[str, Any]:
        return cast(
            dict[str, Any],
            target.custom.patch_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                target.namespace,
                kinds.Plural.TALOS_CLUSTERS,
                name,
                dict(patch),
                _content_type="application/merge-patch+json",
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )

    return call(target, f"updating TalosCluster {target.namespace}/{name}", write)


def annotate_installation(target: Target, key: str, value: str) -> dict[str, Any]:
    """Set one annotation of the IchorInstallation with an update (PUT) of the object as
    read (the verb ``update``, judged by the webhook like any update), read again and
    retried when it moved meanwhile."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    what = "updating the IchorInstallation"
    for _ in range(3):
        found = get_installation(target)
        if found is None:
            raise CliError(
                f"there is no IchorInstallation named {kinds.INSTALLATION_NAME}: the chart "
                "creates it (installation.create)"
            )
        meta = found.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), key: value}
        try:
            return cast(
                dict[str, Any],
                target.custom.replace_cluster_custom_object(
                    kinds.GROUP,
                    kinds.VERSION,
                    kinds.Plural.ICHOR_INSTALLATIONS,
                    kinds.INSTALLATION_NAME,
                    found,
                    _request_timeout=REQUEST_TIMEOUT,
                ),
            )
        except ApiException as error:
            if error.status == 409:
                continue
            found_failure = failure(error, what=what)
            if error.status == 403 and isinstance(found_failure, CliError):
                check = f"ichorinstallations.{kinds.GROUP}/{kinds.INSTALLATION_NAME}"
                raise CliError(
                    f"{what} was refused: {api_message(error)}; this needs the RBAC verb "
                    f"`update` on {check} (check: kubectl auth can-i update {check})"
                ) from None
            raise found_failure from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise CliError(
                f"{what} failed: the API server at {target.server} cannot be reached ({error})"
            ) from None
    raise CliError(f"{what} failed: it kept changing while it was written; run the command again")


def list_operations(target: Target, *, all_namespaces: bool) -> list[dict[str, Any]]:
    """The TalosOperations of the target namespace (or of every namespace)."""
    return _list_own(target, kinds.Kind.TALOS_OPERATION, all_namespaces=all_namespaces)


def get_operation(target: Target, name: str) -> dict[str, Any]:
    """The TalosOperation ``name`` in the target namespace; a missing one is a CliError."""
    return _get_own(target, kinds.Kind.TALOS_OPERATION, name)


def job_pods(target: Target, job: str) -> list[dict[str, Any]]:
    """The Pods of the Job ``job`` in the target namespace, oldest first."""

    def read() -> list[dict[str, Any]]:
        listed = target.core.list_namespaced_pod(
            target.namespace,
            label_selector=f"job-name={job}",
            _request_timeout=REQUEST_TIMEOUT,
        )
        plain = target.api.sanitize_for_serialization(listed)  # type: ignore[no-untyped-call]
        items = list(cast(dict[str, Any], plain).get("items") or [])
        return sorted(items, key=lambda pod: str(pod["metadata"].get("creationTimestamp", "")))

    return call(target, f"listing the Pods of Job {target.namespace}/{job}", read)


def pod_log(target: Target, pod: str, container: str, *, tail: int | None = None) -> str:
    """The log of ``container`` of Pod ``pod`` (its last ``tail`` lines when given)."""

    def read() -> str:
        params: dict[str, Any] = {"container": container, "_request_timeout": REQUEST_TIMEOUT}
        if tail is not None:
            params["tail_lines"] = tail
        # raw bytes: the client would parse a log that happens to be JSON and print its repr
        response: Any = target.core.read_namespaced_pod_log(
            pod, target.namespace, _preload_content=False, **params
        )
        return bytes(response.data).decode("utf-8", errors="replace")

    return call(target, f"reading the log of {container} in Pod {target.namespace}/{pod}", read)
