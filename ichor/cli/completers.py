"""What the shell completes: cluster names, offered versions and operation names, read
from the management cluster with the options typed so far (``--kubeconfig``, ``-n``...).

Each completer answers with what the API says or with nothing: a completion never prints
an error into the line being typed, so any failure (no kubeconfig, no access, a slow
server) completes nothing. The versions are the choices ``--list`` would print (the same
functions as the controller), so the shell offers only what the rules offer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import click
from click.shell_completion import CompletionItem


def _quietly(read: Callable[[], Iterable[CompletionItem]]) -> list[CompletionItem]:
    try:
        return list(read())
    except (Exception, SystemExit):
        return []


def _matching(
    names: Iterable[str], incomplete: str, help_: str | None = None
) -> list[CompletionItem]:
    return [CompletionItem(name, help=help_) for name in names if name.startswith(incomplete)]


def clusters(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The TalosClusters of the namespace."""

    def read() -> list[CompletionItem]:
        from ichor.cli import common, kube

        bodies = kube.list_clusters(common.target(ctx), all_namespaces=False)
        names = sorted(str((b.get("metadata") or {}).get("name", "")) for b in bodies)
        return _matching(names, incomplete)

    return _quietly(read)


def operations(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The TalosOperations of the namespace."""

    def read() -> list[CompletionItem]:
        from ichor.cli import common, kube

        bodies = kube.list_operations(common.target(ctx), all_namespaces=False)
        names = sorted(str((b.get("metadata") or {}).get("name", "")) for b in bodies)
        return _matching(names, incomplete)

    return _quietly(read)


def versions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The versions the rules offer CLUSTER (already typed) for the command's component,
    newest first, the default first of all."""

    def read() -> list[CompletionItem]:
        from ichor.cli import common, kube, views

        cluster = ctx.params.get("cluster")
        if not cluster:
            return []
        target = common.target(ctx)
        seen = views.Cluster.of(kube.get_cluster(target, str(cluster)))
        from ichor.upgrade.rule import Component

        component = Component(str(ctx.command.name))
        releases = views.release_list(kube.get_installation(target), component)
        listed = views.choice_list(seen, component, releases)
        choices = listed.choices
        default = choices.default
        offered = [
            *([choices.recommended] if choices.recommended else []),
            *choices.patch,
            *choices.next_minor,
        ]
        ordered = sorted(set(offered), key=lambda v: (v != default, [-n for n in v.core]))
        items = []
        for version in ordered:
            if version.tag.startswith(incomplete) or str(version).startswith(incomplete):
                note = "default" if version == default else None
                items.append(CompletionItem(version.tag, help=note))
        return items

    return _quietly(read)
