"""The checks of one spec change, and the wordings that name the step a user can take.

The webhook runs these on every TalosCluster write: a version field never moves back,
and a Kubernetes change must run with the cluster's Talos and, when the CNI is a Cilium
Ichor runs (managed and observed), with the Cilium that runs. When Cilium is what stands
in the way, the refusal says whether the chart this Ichor embeds would run the target
(upgrade Cilium first) or not (a newer Ichor is needed): Cilium moves only to the
embedded chart.

It does not check paths or skew (the plan's rule) and never reads the Cilium version of
another CNI: ``cilium_release`` is the only way to get a Cilium release from status.
"""

from __future__ import annotations

from dataclasses import dataclass

from ichor.release import compat, observed
from ichor.release.observed import Unreadable
from ichor.release.refusals import Refusal, Rule, Verdict, judge, refuse
from ichor.release.release_set import PINNED
from ichor.release.versions import (
    Version,
    VersionError,
    as_version,
    check_contract,
    check_spec_version,
    parse,
)

__all__ = [
    "CILIUM",
    "CiliumRelease",
    "VersionFields",
    "check_kubernetes_step",
    "check_update",
    "cilium_behind_chart",
    "cilium_constrains",
    "cilium_release",
    "cni_preset_step",
    "frozen_patch",
    "is_cilium",
    "kubernetes_step",
    "seen_cilium",
    "skipped_cilium_half",
]

CILIUM = "cilium"


@dataclass(frozen=True, slots=True)
class VersionFields:
    """The version fields of a TalosCluster spec, as written."""

    talos: str
    kubernetes: str
    contract: str


def check_update(*, old: VersionFields, new: VersionFields) -> Refusal | None:
    """No downgrade of talosVersion, kubernetesVersion or versionContract.

    An unchanged value is always allowed, whatever its form; a changed value that is not
    in its field's form is refused as FORM; an old value that does not parse has nothing
    to compare against and does not block the fix.
    """
    for field, before, after in (
        ("talosVersion", old.talos, new.talos),
        ("kubernetesVersion", old.kubernetes, new.kubernetes),
    ):
        if before == after:
            continue
        try:
            after_v = check_spec_version(after, field=field)
        except VersionError as error:
            return refuse(Rule.FORM, f"{error}.")
        try:
            before_v: Version | None = check_spec_version(before, field=field)
        except VersionError:
            before_v = None
        if before_v is not None and after_v < before_v:
            return _downgrade(field, before=before, after=after)
    if old.contract != new.contract:
        try:
            after_c = check_contract(new.contract)
        except VersionError as error:
            return refuse(Rule.FORM, f"{error}.")
        try:
            before_c: tuple[int, int] | None = check_contract(old.contract)
        except VersionError:
            before_c = None
        if before_c is not None and after_c < before_c:
            return _downgrade("versionContract", before=old.contract, after=new.contract)
    return None


def _downgrade(field: str, *, before: str, after: str) -> Refusal:
    return refuse(
        Rule.DOWNGRADE,
        f"{field} {after} is refused: it is older than {before} and a version never moves "
        f"back (no downgrade), so keep {before} or choose a newer version.",
    )


def is_cilium(name: str | None) -> bool:
    """The one test of "this CNI is Cilium", for a detected kind or a preset however it is
    written (``Cilium``, `` cilium ``); None (nothing observed) is not Cilium."""
    return name is not None and name.strip().lower() == CILIUM


def cilium_constrains(*, preset: str | None, detected: str | None) -> bool:
    """Whether the Cilium table bounds Kubernetes: only for a Cilium Ichor runs, managed
    (``spec.cni.preset: cilium``, the default) and observed (``status.cni.detected``)."""
    return is_cilium(CILIUM if preset is None else preset) and is_cilium(detected)


#: What a rule reads of the Cilium that runs: its release, ``Unreadable`` when Cilium is
#: seen but its release cannot be read, None when the Cilium half does not apply.
CiliumRelease = str | Unreadable | None


def cilium_release(
    *,
    detected: str | None,
    version: str | None,
    preset: str | None = CILIUM,
    unreadable: str | None = None,
) -> CiliumRelease:
    """The Cilium release that runs, only when the Cilium half applies
    (``cilium_constrains``): never the version of another CNI, nor of a Cilium the user
    runs on an unmanaged cluster. ``preset`` defaults to the CRD's default (managed), the
    side on which more is judged, never less.

    A Cilium seen (``detected``) with no release (``version`` empty) is ``Unreadable``,
    never None: it is there, so every step that would judge it is refused.
    ``unreadable`` is the controller's sentence of why (``status.cni.unreadable``)."""
    if not cilium_constrains(preset=preset, detected=detected):
        return None
    return seen_cilium(version=version, unreadable=unreadable)


def seen_cilium(*, version: str | None, unreadable: str | None = None) -> str | Unreadable:
    """The release of a Cilium seen running, whatever the preset: ``Unreadable`` when
    the status holds none (``cilium_release`` for the rules; the unmanaged trace asks
    what the rule would have said)."""
    if version is None or not version.strip():
        return observed.cilium(unreadable)
    return version.strip()


def skipped_cilium_half(
    *,
    preset: str | None,
    detected: str | None,
    version: str | None,
    kubernetes: str | Version,
    unreadable: str | None = None,
    embedded_cilium: str = PINNED.cilium_chart,
) -> Refusal | None:
    """What the Cilium half would say of a Kubernetes step on a cluster that runs Cilium
    while ``spec.cni.preset`` leaves it to the user (the half is skipped there); None when
    it would not refuse, or when the half is not skipped (no Cilium seen, or managed).

    The decision record lets an unmanaged cluster skip the Cilium rule, not without a
    trace: the webhook records this refusal as a Warning Event naming the user. Raises
    ``VersionError`` when ``kubernetes`` does not parse.
    """
    if not is_cilium(detected) or cilium_constrains(preset=preset, detected=detected):
        return None
    return _cilium_half(
        kubernetes=kubernetes,
        cilium=seen_cilium(version=version, unreadable=unreadable),
        embedded_cilium=embedded_cilium,
    )


def cni_preset_step(
    *,
    old_preset: str | None,
    new_preset: str | None,
    detected: str | None,
    version: str | None,
    kubernetes: str | Version | None,
    embedded_cilium: str = PINNED.cilium_chart,
    unreadable: str | None = None,
) -> Verdict:
    """A write of ``spec.cni.preset`` that changes whether the Cilium table holds the
    cluster (``cilium_constrains``), judged while a Cilium is observed; clean otherwise.

    The preset is in the spec, so without this rule a user could take a cluster out from
    under the table (``cilium`` to ``unmanaged``), run a Kubernetes step its Cilium
    refuses, and put the preset back. So:

    * releasing an observed Cilium (``cilium`` to anything else) is a ``CNI_PRESET``
      refusal: it hands every later Kubernetes step's Cilium compatibility to the user,
      which only the override verb may do;
    * either way (release or take-over), the Cilium half is asked of the Kubernetes the
      cluster runs: taking over a Cilium that does not run it is the Cilium pair's
      refusal, and a Cilium this build does not know is neither taken over nor released
      (UnknownVersion, which no override passes, so the verb cannot pass an unknown
      Cilium in two writes). ``kubernetes`` None: the write moves Kubernetes too, and
      its step (``kubernetes_step``) asks the Cilium half of the new version.
    * a Cilium whose release cannot be read (``Unreadable``) is neither taken over nor
      released, whatever Kubernetes does: UnreadableVersion, which no override passes.

    Raises ``VersionError`` when ``kubernetes`` does not parse.
    """
    managed_before = is_cilium(CILIUM if old_preset is None else old_preset)
    managed_after = is_cilium(CILIUM if new_preset is None else new_preset)
    if managed_before == managed_after or not is_cilium(detected):
        return Verdict()
    running = seen_cilium(version=version, unreadable=unreadable)
    change = f"spec.cni.preset from {old_preset} to {new_preset}"
    answers: list[Refusal | None] = []
    if managed_before:
        shown = running if isinstance(running, str) else "(release not readable)"
        answers.append(
            refuse(
                Rule.CNI_PRESET,
                f"{change} is refused while Cilium {shown} runs on "
                f"the cluster (status.cni.detected): {new_preset} takes its Kubernetes steps "
                f"out from under Cilium's compatibility table (Cilium CI matrix), which hands "
                f"that compatibility to the user; keep spec.cni.preset {old_preset}.",
            )
        )
    if isinstance(running, Unreadable):
        answers.append(running.refusal(change))
        return judge(answers)
    half = (
        None
        if kubernetes is None
        else _cilium_half(kubernetes=kubernetes, cilium=running, embedded_cilium=embedded_cilium)
    )
    if half is not None:
        answers.append(refuse(half.rule, f"{change}, judged with the Cilium that runs: {half}"))
    return judge(answers)


def cilium_behind_chart(running: str, *, chart: str = PINNED.cilium_chart) -> bool:
    """Whether the running Cilium is older than the chart this Ichor embeds, so the chart
    upgrade is offered. Raises ``VersionError`` when ``running`` does not parse."""
    return parse(running) < parse(chart)


def frozen_patch(recorded: str | None, *, chart: str = PINNED.cilium_chart) -> str | None:
    """The Cilium image patch an earlier Ichor recorded that stays: only one newer than
    the chart this Ichor embeds (rendered, so an Ichor upgrade never steps Cilium back);
    None when there is none or the chart reached it (cleared). Raises ``VersionError``
    when ``recorded`` does not parse."""
    if not recorded:
        return None
    return recorded if parse(recorded) > parse(chart) else None


def check_kubernetes_step(
    *,
    talos: str | Version,
    kubernetes: str | Version,
    cilium: CiliumRelease,
    embedded_cilium: str = PINNED.cilium_chart,
) -> Refusal | None:
    """The refusal of ``kubernetes_step`` that matters: one no override passes, if any."""
    return kubernetes_step(
        talos=talos, kubernetes=kubernetes, cilium=cilium, embedded_cilium=embedded_cilium
    ).refusal


def kubernetes_step(
    *,
    talos: str | Version,
    kubernetes: str | Version,
    cilium: CiliumRelease,
    embedded_cilium: str = PINNED.cilium_chart,
) -> Verdict:
    """A Kubernetes step: the Talos pair, then (for a Cilium CNI) the running Cilium.

    Both halves are asked: a Talos pair refusal is overridable, so the Cilium half is
    judged behind it, and a Cilium this build does not know is refused whatever the pair
    says. ``cilium`` comes from ``cilium_release``: None skips the Cilium half (another
    CNI, or none observed yet); ``Unreadable`` (Cilium seen, release not) refuses, and no
    override passes it. Raises ``VersionError`` when Talos or Kubernetes does not parse.
    """
    return judge(
        (
            compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes),
            _cilium_half(kubernetes=kubernetes, cilium=cilium, embedded_cilium=embedded_cilium),
        )
    )


def _cilium_half(
    *, kubernetes: str | Version, cilium: CiliumRelease, embedded_cilium: str
) -> Refusal | None:
    if cilium is None:
        return None
    if isinstance(cilium, Unreadable):
        return cilium.refusal(f"Kubernetes {as_version(kubernetes).tag}")
    running = compat.cilium_kubernetes_error(cilium=cilium, kubernetes=kubernetes)
    if running is None or running.rule is not Rule.CILIUM_KUBERNETES:
        return running
    target = as_version(kubernetes)
    entry = compat.CILIUM_KUBERNETES[parse(cilium).minor_key]
    head = (
        f"Kubernetes {target.tag} is refused: Cilium {cilium} runs Kubernetes {entry} "
        f"(Cilium CI matrix); "
    )
    if compat.cilium_kubernetes_error(cilium=embedded_cilium, kubernetes=target) is None:
        step = (
            f"upgrade Cilium to {embedded_cilium} first, the chart this Ichor embeds, "
            f"which runs Kubernetes {target.tag}."
        )
    else:
        step = (
            f"this Ichor ships Cilium {embedded_cilium}, which does not run Kubernetes "
            f"{target.tag}: a newer Ichor release is needed."
        )
    return refuse(Rule.CILIUM_KUBERNETES, head + step)
