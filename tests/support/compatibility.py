"""The compatibility page's tables, rendered from ``ichor.release``.

Nothing here holds a number: the release set is ``PINNED``, the pairs are asked of the
rule functions themselves (``compat.talos_kubernetes_error``,
``compat.cilium_kubernetes_error``) for every minor this build knows, and the Talos path
and the sources are read from the machinery rows and the table's entries. So the page
says what the webhook, the plan and the executors decide, not what someone wrote down.
"""

from __future__ import annotations

from ichor.release import compat, machinery, machinery_rows
from ichor.release.release_set import PINNED

Minor = tuple[int, int]


def _text(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def _spans(minors: list[Minor]) -> str:
    """``1.33 to 1.37``, or several spans when the minors are not contiguous."""
    if not minors:
        return "none"
    spans: list[list[Minor]] = [[minors[0]]]
    for minor in minors[1:]:
        last = spans[-1][-1]
        if minor[0] == last[0] and minor[1] == last[1] + 1:
            spans[-1].append(minor)
        else:
            spans.append([minor])
    return ", ".join(
        _text(s[0]) if len(s) == 1 else f"{_text(s[0])} to {_text(s[-1])}" for s in spans
    )


def _kubernetes_minors() -> list[Minor]:
    return sorted(compat.known_kubernetes_minors())


def talos_runs(talos: Minor) -> list[Minor]:
    """The Kubernetes minors whose ``.0`` the pair rule accepts with Talos ``X.Y.0``."""
    return [
        k
        for k in _kubernetes_minors()
        if compat.talos_kubernetes_error(talos=f"v{_text(talos)}.0", kubernetes=f"v{_text(k)}.0")
        is None
    ]


def cilium_runs(cilium: Minor) -> list[Minor]:
    return [
        k
        for k in _kubernetes_minors()
        if compat.cilium_kubernetes_error(cilium=f"{_text(cilium)}.0", kubernetes=f"v{_text(k)}.0")
        is None
    ]


def render() -> str:
    out = [
        "## The release set of this build",
        "",
        "What `ichor init` installs and `ichor version` prints; nothing after the first "
        "install is bound to it.",
        "",
        "| Talos | Kubernetes | version contract | Cilium chart |",
        "| --- | --- | --- | --- |",
        f"| `{PINNED.talos}` | `{PINNED.kubernetes}` | `{PINNED.contract}` | "
        f"`{PINNED.cilium_chart}` |",
        "",
        "## Talos and Kubernetes",
        "",
        "Each Talos minor this build knows, the Kubernetes minors the pair rule accepts with "
        "it, and who decides: the Talos support matrix where the table holds the minor "
        "(machinery must still accept the pair), else Talos machinery's own row.",
        "",
        "| Talos | runs Kubernetes | decided by | machinery's Kubernetes bounds |",
        "| --- | --- | --- | --- |",
    ]
    for talos in sorted(compat.known_talos_minors(), reverse=True):
        entry = compat.TALOS_KUBERNETES.get(talos)
        row = machinery.bounds(talos)
        decided = f"[support matrix]({entry.source})" if entry else "machinery"
        if row is not None:
            lo, hi = row.row.min_kubernetes, row.row.max_kubernetes
            kept = f"[{lo} up to, not including, {hi}]({row.row.source})"
        else:
            kept = "none"
        out.append(f"| {_text(talos)} | {_spans(talos_runs(talos))} | {decided} | {kept} |")
    out += [
        "",
        "## Cilium and Kubernetes",
        "",
        "From each Cilium release's CI matrix. A Cilium minor not listed is unknown to this "
        "build; the pair is judged only for a Cilium Ichor runs (`cni.preset: cilium`, "
        "observed as Cilium).",
        "",
        "| Cilium | runs Kubernetes | source |",
        "| --- | --- | --- |",
    ]
    for cilium in sorted(compat.CILIUM_KUBERNETES, reverse=True):
        entry = compat.CILIUM_KUBERNETES[cilium]
        out.append(
            f"| {_text(cilium)} | {_spans(cilium_runs(cilium))} | [CI matrix]({entry.source}) |"
        )
    out += [
        "",
        "## The Talos upgrade path",
        "",
        "Which running Talos may install each target minor directly (Talos machinery's "
        "`UpgradeableFrom`); a minor may be skipped within these bounds. Kubernetes moves "
        "one minor at a time.",
        "",
        "| target Talos | installs over Talos | source |",
        "| --- | --- | --- |",
    ]
    for machinery_row in sorted(machinery_rows.ROWS, key=lambda r: r.talos, reverse=True):
        hosts = machinery_row.denied_hosts
        denied = f", except {', '.join(hosts)}" if hosts else ""
        out.append(
            f"| {_text(machinery_row.talos)} | {machinery_row.min_host} up to, not including, "
            f"{machinery_row.max_host_downgrade}{denied} | [machinery]({machinery_row.source}) |"
        )
    return "\n".join(out)
