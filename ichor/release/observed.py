"""A component seen running whose release cannot be read: a value of its own, never None.

None says "not there", and a rule skips what is not there. A Cilium pinned by digest that
no Helm release names, or Nodes whose versions are not versions, are there but unknown:
their readers give ``Unreadable``, mypy makes every rule handle it, and each refuses with
``refusal`` (rule ``UnreadableVersion``, which no override passes). The sentence is the
controller's own, never a value a workload cluster sent.

More in docs/design/notes.md, "ichor/release/observed.py".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ichor.release.refusals import Refusal, Rule, refuse

__all__ = [
    "CILIUM_STEP",
    "MAX_SENTENCE",
    "NODES_STEP",
    "NO_OVERRIDE",
    "Unreadable",
    "cilium",
    "nodes",
]

NO_OVERRIDE = "no override passes a release that cannot be read"
#: What a person does about a Cilium whose release cannot be read.
CILIUM_STEP = "tag the image with its release or deploy it with Helm, then try again"
#: What a person does about Nodes whose versions cannot be read.
NODES_STEP = (
    "fix or remove those Nodes so each reports osImage Talos (vX.Y.Z) and its kubelet "
    "version, then try again"
)
#: The longest sentence taken from a status (the controller writes far shorter ones).
MAX_SENTENCE = 1024


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Seen running, release unknown: ``what`` says what was seen and what could not be
    read, ``step`` what a person does about it."""

    what: str
    step: str

    def refusal(self, refused: str) -> Refusal:
        """The refusal of a step that would judge this release; ``refused`` names the
        step (``Kubernetes v1.37.2``, ``TalosOperation team-a/up (talos to v1.14.4)``)."""
        return refuse(
            Rule.UNREADABLE_VERSION,
            f"{refused} is refused: {self.what}; {self.step}; {NO_OVERRIDE}.",
        )

    def __str__(self) -> str:
        return f"{self.what}; {self.step}"


def _bounded(text: str | None) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    text = " ".join(text.split())
    return text if len(text) <= MAX_SENTENCE else text[: MAX_SENTENCE - 3] + "..."


def cilium(said: str | None = None) -> Unreadable:
    """A Cilium seen running (``status.cni.detected: cilium``) whose release is not in
    ``status.cni.detectedVersion``; ``said`` is the controller's sentence of why
    (``status.cni.unreadable``), if it wrote one."""
    what = _bounded(said) or (
        "Cilium is running (status.cni.detected: cilium) but its release cannot be read "
        "(status.cni.detectedVersion is empty)"
    )
    return Unreadable(what=what, step=CILIUM_STEP)


def nodes(said: Sequence[str]) -> Unreadable:
    """Nodes seen whose Talos or kubelet version cannot be read (``status.nodes.unreadable``,
    the controller's sentences)."""
    named = _bounded("; ".join(s for s in said if isinstance(s, str))) or (
        "the versions of some Nodes cannot be read"
    )
    return Unreadable(
        what=f"the workload cluster's Nodes cannot all be read ({named}), so what they run "
        f"is unknown",
        step=NODES_STEP,
    )
