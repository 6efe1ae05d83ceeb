"""The path rules of one upgrade: how far Talos and Kubernetes may move in one step.

- Talos follows machinery's ``UpgradeableFrom``: within the target minor's bounds a minor
  may be skipped (the docs only test adjacent minors; the choices offer only those).
- Kubernetes moves at most one minor up, within its major, never back (Kubernetes
  version skew policy: the API server does not skip minors), and must be supported by
  the cluster's Talos (machinery's ``SupportedWith``).

These rules are enforced again by Talos and talosctl themselves, so their refusals are
not overridable; a minor that no rule knows is an unknown version. Nothing here decides
whether a target is newer or final: that is the target rule's (``target.py``).
"""

from __future__ import annotations

from ichor.release import compat, machinery
from ichor.release.refusals import Refusal, Rule, refuse
from ichor.release.versions import Version, as_version

__all__ = ["kubernetes_pairing", "kubernetes_skew", "talos_path"]


def talos_path(*, running: str | Version, target: str | Version) -> Refusal | None:
    """None when a node on ``running`` may install ``target``. Raises ``VersionError``."""
    running_v, target_v = as_version(running), as_version(target)
    said = machinery.upgradeable_from(target=target_v, host=running_v)
    if said is None:
        return None
    row = machinery.bounds(target_v.minor_key)
    if row is None:
        # Machinery's words first ("upgrades to version ... are not supported"), the step
        # after them: the table may know the minor's Kubernetes, machinery knows no path.
        unknown = compat.unknown_talos(target_v, machinery_said=said)
        if unknown is not None:
            return unknown
        return refuse(
            Rule.UNKNOWN_VERSION,
            f"Talos {target_v.tag} is refused: {said} (Talos machinery), so a newer Ichor "
            f"release is needed.",
        )
    lo, hi = row.min_host, row.max_host_downgrade
    minor = compat.minor_text(target_v.minor_key)
    if running_v.core < lo:
        step = f"upgrade to Talos {lo[0]}.{lo[1]} or newer first"
    elif running_v.core >= hi:
        step = "choose a newer Talos"
    else:
        step = "choose another Talos release"
    return refuse(
        Rule.TALOS_PATH,
        f"Talos {target_v.tag} is refused from {running_v.tag}: Talos {minor} installs over "
        f"Talos {lo[0]}.{lo[1]}.{lo[2]} up to, not including, {hi[0]}.{hi[1]}.{hi[2]} "
        f"(Talos machinery: {said}), so {step}.",
    )


def kubernetes_skew(*, running: str | Version, target: str | Version) -> Refusal | None:
    """At most one minor up, same major, never back. Raises ``VersionError``."""
    running_v, target_v = as_version(running), as_version(target)
    if target_v.major == running_v.major and (
        target_v.minor == running_v.minor + 1
        or (target_v.minor == running_v.minor and target_v >= running_v)
    ):
        return None
    here = compat.minor_text(running_v.minor_key)
    nxt = compat.minor_text((running_v.major, running_v.minor + 1))
    if target_v < running_v:
        why, step = "never moves back", f"choose {running_v.tag} or newer"
    else:
        why, step = (
            "moves at most one minor at a time, within its major",
            f"upgrade to the newest Kubernetes {nxt} first",
        )
    return refuse(
        Rule.KUBERNETES_SKEW,
        f"Kubernetes {target_v.tag} is refused from {running_v.tag}: Kubernetes {why} "
        f"({here} to {here} or {nxt}, Kubernetes version skew policy), so {step}.",
    )


def kubernetes_pairing(*, target: str | Version, talos: str | Version) -> Refusal | None:
    """Machinery's ``SupportedWith`` for the cluster's Talos. Raises ``VersionError``.

    Only machinery: the table's narrower ranges are the compatibility rule
    (``compat.talos_kubernetes_error``), which the target rule applies on top.
    """
    target_v, talos_v = as_version(target), as_version(talos)
    said = machinery.kubernetes_supported_with(kubernetes=target_v, talos=talos_v)
    if said is None:
        return None
    unknown = compat.unknown_talos(talos_v) or compat.unknown_kubernetes(target_v)
    if unknown is not None:
        return unknown
    if machinery.bounds(talos_v.minor_key) is None:
        return refuse(Rule.UNKNOWN_VERSION, f"Talos {talos_v.tag} is refused: {said}.")
    row = machinery.bounds(talos_v.minor_key)
    assert row is not None
    lo, hi = row.min_kubernetes, row.max_kubernetes
    return refuse(
        Rule.TALOS_KUBERNETES,
        f"Kubernetes {target_v.tag} is refused with Talos {talos_v.tag}: Talos "
        f"{compat.minor_text(talos_v.minor_key)} runs Kubernetes {lo[0]}.{lo[1]}.{lo[2]} up "
        f"to, not including, {hi[0]}.{hi[1]}.{hi[2]} (Talos machinery: {said}), so choose a "
        f"Kubernetes in that range.",
    )
