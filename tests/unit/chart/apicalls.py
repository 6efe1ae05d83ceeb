"""The Kubernetes permissions the operator's code needs, read from the code itself.

The chart's ClusterRole must grant exactly these. They are found without running anything:

- every attribute of the operator's modules that names a method of a
  ``kubernetes.aio`` API class (``list_node``, ``patch_namespaced_custom_object_status``
  ...), whether called or passed on, becomes (group, resource, verb): the group from the
  API class the module uses, the resource from the method name, or for custom objects
  from the ``kinds.Plural`` constant among the arguments (or the ``kind=kinds.Kind.X`` a
  caller of the wrapping function passes);
- every ``kopf.on.event(kinds.GROUP, kinds.VERSION, kinds.Plural.X, ...)`` is a watch:
  list and watch on X; a function that passes its own parameter there (the wiring's
  ``running.watch``) is followed to its callers, which must name ``kinds.Plural.X``;
- the ``Impersonate-User`` header (``ichor.kube.impersonation``) is ``impersonate`` on
  serviceaccounts, the only kind of user the operator acts as.

A call on a line marked ``# workload read`` runs on a workload's client, never as the
operator: a kubeconfig Secret's credentials, or a tenant's ServiceAccount in the cluster
the operator runs in. It is a *workload* permission (``scan().workload``), which the
operator's own ClusterRole must not grant for it; ``ichor-tenant-reader`` grants the
tenant's part.

A method it cannot place (an API class the module does not use, a custom-object call
whose plural it cannot find) is an error naming the file and line, never a guess.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes.aio import client

from ichor.api import kinds

ROOT = Path(__file__).resolve().parents[3]
#: The code that runs in the operator Pod (the CLI and the test tools run elsewhere).
OPERATOR_PACKAGES = ("ichor/controller", "ichor/webhook", "ichor/kube", "ichor/operator.py")

VERBS = {
    "read": "get",
    "get": "get",
    "list": "list",
    "create": "create",
    "patch": "patch",
    "replace": "update",
    "delete": "delete",
    "watch": "watch",
}
METHOD = re.compile(
    r"^(?P<verb>read|get|list|create|patch|replace|delete|watch)_"
    r"(?:namespaced_|cluster_)?(?P<resource>[a-z_]+?)(?P<all>_for_all_namespaces)?"
    r"(?P<status>_status)?(?:_without_preload_content)?$"
)
CUSTOM = "custom_object"
#: Methods on a subresource other than status, by the resource part of their name.
SUBRESOURCES = {"pod_log": "pods/log"}
#: The comment that marks a call made on a workload's client (see the docstring).
WORKLOAD_READ = "# workload read"
IMPERSONATE_USER = "Impersonate-User"


class ScanError(Exception):
    """A call the scanner cannot turn into a permission."""


@dataclass(frozen=True, order=True)
class Permission:
    group: str
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}.{self.group or 'core'}"


@functools.cache
def _group(api_class: str) -> str:
    """``CoreV1Api`` -> "", ``BatchV1Api`` -> batch, ``AuthorizationV1Api`` ->
    authorization.k8s.io (the API class's own resource path names the group)."""
    if api_class == "CoreV1Api":
        return ""
    cls = getattr(client, api_class)
    source = Path(inspect.getfile(cls)).read_text()
    found = re.search(r"'/apis/([^/']+)/", source)
    if found is None:
        raise ScanError(f"no group for {api_class}")
    return found.group(1)


@functools.cache
def _api_methods() -> dict[str, set[str]]:
    """Method name -> the API classes that have it."""
    methods: dict[str, set[str]] = {}
    for name in dir(client):
        if not name.endswith("Api") or name == "ApiClient":
            continue
        for attr in dir(getattr(client, name)):
            if not attr.startswith("_") and not attr.endswith("_with_http_info"):
                methods.setdefault(attr, set()).add(name)
    return methods


def _plural_in(node: ast.AST) -> str | None:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "Plural"
        ):
            return str(kinds.Plural[sub.attr].value)
    return None


def _kind_arguments(
    trees: dict[Path, ast.Module], function: str, *, seen: frozenset[str] = frozenset()
) -> set[str]:
    """Plurals of ``kind=kinds.Kind.X`` passed to calls of ``function`` anywhere; a caller
    that passes its own ``kind`` on (``kind=kind``, the client layer's functions) is
    followed to its callers."""
    found: set[str] = set()
    for _, node, parents in _calls(trees, function):
        for keyword in node.keywords:
            if keyword.arg != "kind":
                continue
            named = {
                sub.attr
                for sub in ast.walk(keyword.value)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Attribute)
                and sub.value.attr == "Kind"
            }
            found |= {str(kinds.PLURALS[kinds.Kind[kind]]) for kind in named}
            if not named and isinstance(keyword.value, ast.Name):
                caller = next(
                    p for p in _enclosing(node, parents)
                    if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef)
                )  # fmt: skip
                if caller.name not in seen:
                    found |= _kind_arguments(trees, caller.name, seen=seen | {function})
    return found


def _calls(
    trees: dict[Path, ast.Module], function: str
) -> Iterator[tuple[Path, ast.Call, dict[ast.AST, ast.AST]]]:
    """Every call of a function named ``function`` (``f(...)`` or ``x.f(...)``), with its
    file and the parents of its tree's nodes."""
    for path, tree in trees.items():
        parents = _parents(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            name = node.func.id if isinstance(node.func, ast.Name) else name
            if name == function:
                yield path, node, parents


def _params(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


def _sources(root: Path) -> dict[Path, ast.Module]:
    files: list[Path] = []
    for entry in OPERATOR_PACKAGES:
        path = root / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return {path: ast.parse(path.read_text(), filename=str(path)) for path in files}


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> Iterator[ast.AST]:
    while node in parents:
        node = parents[node]
        yield node


@dataclass(frozen=True)
class Scan:
    #: What the operator's own identity calls.
    operator: frozenset[Permission]
    #: What the calls marked ``# workload read`` ask of a workload's identity.
    workload: frozenset[Permission]


def permissions(root: Path = ROOT) -> set[Permission]:
    """Every permission the operator's code calls for, as itself or on a workload."""
    found = scan(root)
    return set(found.operator | found.workload)


def operator_permissions(root: Path = ROOT) -> set[Permission]:
    """What the operator's own identity needs on the cluster it runs in."""
    return set(scan(root).operator)


def scan(root: Path = ROOT) -> Scan:
    """The permissions the code calls for, the operator's and the workload reads'."""
    methods = _api_methods()
    trees = _sources(root)
    needed: set[Permission] = set()
    workload: set[Permission] = set()
    for path, tree in trees.items():
        where = path.relative_to(root)
        lines = path.read_text().splitlines()
        if any(
            isinstance(node, ast.Constant) and node.value == IMPERSONATE_USER
            for node in ast.walk(tree)
        ):
            needed.add(Permission("", "serviceaccounts", "impersonate"))
        used_classes = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr in {c for s in methods.values() for c in s}
        }
        parents = _parents(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_kopf_event(node.func):
                group, plural = _watched(node)
                plurals = {plural} if plural is not None else _wrapped(trees, node, parents)
                if not plurals:
                    raise ScanError(f"{where}:{node.lineno}: kopf.on.event on an unknown kind")
                needed |= {Permission(group, p, v) for p in plurals for v in ("list", "watch")}
                continue
            if not isinstance(node, ast.Attribute) or node.attr not in methods:
                continue
            match = METHOD.match(node.attr)
            if match is None:
                continue
            candidates = methods[node.attr] & used_classes
            if len(candidates) != 1:
                raise ScanError(
                    f"{where}:{node.lineno}: {node.attr} belongs to {sorted(methods[node.attr])};"
                    f" the module uses {sorted(used_classes) or 'none of them'}"
                )
            verb = VERBS[match["verb"]]
            suffix = "/status" if match["status"] else ""
            if match["resource"] == CUSTOM:
                call = next((p for p in _enclosing(node, parents) if isinstance(p, ast.Call)), None)
                literal = _plural_in(call) if call is not None else None
                plurals = {literal} if literal is not None else set()
                if not plurals:
                    function = next(
                        p for p in _enclosing(node, parents)
                        if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef)
                    )  # fmt: skip
                    plurals = _kind_arguments(trees, function.name)
                if not plurals:
                    raise ScanError(f"{where}:{node.lineno}: {node.attr} on an unknown plural")
                needed |= {Permission(kinds.GROUP, p + suffix, verb) for p in plurals}
                continue
            (api_class,) = candidates
            resource = SUBRESOURCES.get(match["resource"]) or (
                match["resource"].replace("_", "") + "s" + suffix
            )
            permission = Permission(_group(api_class), resource, verb)
            if lines[node.lineno - 1].rstrip().endswith(WORKLOAD_READ):
                workload.add(permission)
            else:
                needed.add(permission)
    return Scan(operator=frozenset(needed), workload=frozenset(workload))


def _watched(call: ast.Call) -> tuple[str, str | None]:
    """(group, plural) of ``kopf.on.event(group, version, plural)``: our kinds by their
    constants, another API's by string literals (``"batch", "v1", "jobs"``)."""
    args = call.args
    if len(args) >= 3 and all(isinstance(a, ast.Constant) for a in args[:3]):
        group, plural = args[0], args[2]
        assert isinstance(group, ast.Constant)
        assert isinstance(plural, ast.Constant)
        return str(group.value), str(plural.value)
    return kinds.GROUP, _plural_in(call)


def _wrapped(
    trees: dict[Path, ast.Module], call: ast.Call, parents: dict[ast.AST, ast.AST]
) -> set[str]:
    """The plurals a wrapper of ``kopf.on.event`` (``ichor.controller.running.watch``) is
    called with: its kind is a parameter of the function around it, so every call of
    that function anywhere must pass ``kinds.Plural.X`` there, or a parameter of its own
    function, followed to that function's callers in turn."""
    kind = call.args[2] if len(call.args) >= 3 else None
    function = next((p for p in _enclosing(call, parents) if isinstance(p, ast.FunctionDef)), None)
    if not isinstance(kind, ast.Name) or function is None:
        return set()
    return _passed(trees, function, kind.id, seen=frozenset())


def _passed(
    trees: dict[Path, ast.Module], function: ast.FunctionDef, name: str, *, seen: frozenset[str]
) -> set[str]:
    """Plurals passed to ``function``'s parameter ``name`` by its callers; a ScanError for
    a call that passes one it cannot read."""
    params = _params(function)
    position = params.index(name) if name in params else None
    found: set[str] = set()
    for path, node, parents in _calls(trees, function.name):
        given = next((k.value for k in node.keywords if k.arg == name), None)
        if given is None and position is not None and position < len(node.args):
            given = node.args[position]
        literal = _plural_in(given) if given is not None else None
        if literal is not None:
            found.add(literal)
            continue
        outer = next((p for p in _enclosing(node, parents) if isinstance(p, ast.FunctionDef)), None)
        if (
            isinstance(given, ast.Name)
            and outer is not None
            and outer.name not in seen
            and given.id in _params(outer)
        ):
            found |= _passed(trees, outer, given.id, seen=seen | {function.name})
            continue
        raise ScanError(
            f"{path}:{node.lineno}: {function.name} watches a kind the scanner cannot "
            "read: pass kinds.Plural.X at the call"
        )
    return found


def _is_kopf_event(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "event"
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "on"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "kopf"
    )


def granted(rules: Iterable[dict[str, list[str]]]) -> set[Permission]:
    """The (group, resource, verb) triples a ClusterRole's rules grant; no wildcards allowed."""
    found: set[Permission] = set()
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    if "*" in (group, resource, verb):
                        raise ScanError(f"a wildcard in {rule}")
                    found.add(Permission(group, resource, verb))
    return found
