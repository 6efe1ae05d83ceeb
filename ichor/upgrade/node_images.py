"""Which installer image each node of a Talos upgrade gets: its own, built from what it runs.

A node gets the image it runs, never a cluster-wide guess: its Image Factory schematic
(the ``schematic`` meta-extension of its ExtensionStatus), that schematic's factory host
(the meta-extension's author), its platform (PlatformMetadata) and SecureBoot
(SecurityState), read through the Talos API; the name is Talos's own (``installer_image``).
A node's extensions change only where the spec names a schematic for it. Refused, with
the node names and the step: a failed or incomplete read, a schematic annotation that
disagrees with the Talos API, extensions from no schematic, and a cluster-wide
``spec.schematic`` known to drop an extension a node runs. Pure: it never reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: The Image Factory's schematic of no customization: the plain Talos, no extensions
#: (siderolabs/talos pkg/images: DefaultInstallerImageSchematic).
PLAIN_SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
#: The meta-extension the Image Factory adds to every image it builds, whose version is
#: the schematic ID (siderolabs/image-factory internal/profile/profile.go).
SCHEMATIC_EXTENSION = "schematic"
#: Nodes named one by one in a sentence; the rest are counted.
MAX_NAMED = 5


def installer_image(
    *, factory: str, platform: str, secure_boot: bool, schematic: str, version: str
) -> str:
    """``<factory>/<platform>-installer[-secureboot]/<schematic>:v<version>``.

    Talos's own naming: ``helpers.BuildImageFactoryURL`` (siderolabs/talos
    cmd/talosctl/pkg/talos/helpers/image_factory.go, main after v1.14) and, in v1.13.9,
    the installer the cluster-create preset names
    (cmd/talosctl/cmd/mgmt/cluster/create/clusterops/configmaker/preset:
    ``factory.talos.dev/metal-installer-secureboot/<schematic>:v9.9.9``).
    """
    kind = f"{platform}-installer" + ("-secureboot" if secure_boot else "")
    return f"{factory}/{kind}/{schematic}:v{version.removeprefix('v')}"


def factory_host(author: str) -> str | None:
    """The factory host of the ``schematic`` meta-extension's author, ``Image Factory
    (https://factory.talos.dev)`` -> ``factory.talos.dev``; None when it names none.

    Talos splits the author the same way (internal/app/machined/pkg/controllers/runtime/
    image_factory_schematic.go ``parseAuthor``), and talosctl keeps the URL's host
    (cmd/talosctl/pkg/talos/helpers/machine_context.go ``factoryHostFromAPIURL``).
    """
    start = author.rfind(" (")
    if start == -1 or not author.endswith(")"):
        return None
    url = author[start + 2 : -1]
    host = urlsplit(url).netloc if "://" in url else ""
    if not host or any(c.isspace() or c in "/@" for c in host):
        return None
    return host


@dataclass(frozen=True, slots=True)
class NodeImage:
    """What one node runs, as the Talos API says: the parts of its installer's name and
    the system extensions it carries (names, sorted; the meta-extension not among them)."""

    platform: str
    secure_boot: bool
    #: None: the node was not built by an Image Factory (no meta-extension).
    schematic: str | None
    #: The Image Factory host of that schematic; None without one.
    factory: str | None
    extensions: tuple[str, ...] = ()

    def key(self) -> tuple[str, bool, str, str, tuple[str, ...]]:
        return (
            self.platform,
            self.secure_boot,
            self.schematic or "",
            self.factory or "",
            self.extensions,
        )


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One workload node: its Kubernetes name and labels, the schematic its Node's
    ``extensions.talos.dev/schematic`` annotation names, and what the Talos API said of
    it (``image``), or why that could not be read (``problem``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotation: str | None = None
    image: NodeImage | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class SchematicRule:
    """``spec.nodeSchematics[]``: the schematic of the nodes whose labels hold every
    pair of ``match_labels``."""

    match_labels: Mapping[str, str]
    schematic: str

    def selects(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items())


@dataclass(frozen=True, slots=True)
class NodePlan:
    """The image one node installs and, for a deliberate change, what it changes."""

    name: str
    image: str
    own: NodeImage
    schematic: str
    #: ``spec.schematic`` or ``spec.nodeSchematics[i]`` when the spec named it, else None.
    named_by: str | None = None

    @property
    def changes(self) -> bool:
        return self.schematic != (self.own.schematic or PLAIN_SCHEMATIC)


@dataclass(frozen=True, slots=True)
class ImagePlan:
    """Every node's image, or the refusals (sentences) that keep the operation from
    starting; ``changes``: one sentence per group of nodes whose extensions change."""

    nodes: tuple[NodePlan, ...] = ()
    refusals: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[str, ...]:
        return change_sentences(self.nodes)


def named(names: Sequence[str]) -> str:
    """``a, b and c``; past ``MAX_NAMED``, the rest counted."""
    shown = list(names[:MAX_NAMED])
    if len(names) > MAX_NAMED:
        shown.append(f"{len(names) - MAX_NAMED} more")
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def short(schematic: str | None) -> str:
    """A schematic ID shortened for a sentence (the first 12 hex digits, as the Image
    Factory's own pages do); ``none`` for a node not built by a factory."""
    return schematic[:12] if schematic else "none"


def _extensions(image: NodeImage) -> str:
    return _extensions_of(image.extensions)


def _extensions_of(names: Iterable[str]) -> str:
    found = sorted(names)
    return ", ".join(found) if found else "no extensions"


def change_sentences(nodes: Iterable[NodePlan]) -> tuple[str, ...]:
    """``Nodes w1 and w2: schematic abc… (iscsi-tools) -> def… (spec.nodeSchematics[0])``
    per group of nodes that change the same way."""
    groups: dict[tuple[str | None, tuple[str, ...], str, str | None], list[str]] = {}
    for plan in nodes:
        if plan.changes:
            key = (plan.own.schematic, plan.own.extensions, plan.schematic, plan.named_by)
            groups.setdefault(key, []).append(plan.name)
    found = []
    for (own, extensions, target, by), names in groups.items():
        label = "Node" if len(names) == 1 else "Nodes"
        what = ", ".join(extensions) if extensions else "no extensions"
        found.append(
            f"{label} {named(names)}: schematic {short(own)} ({what}) -> {short(target)} "
            f"(named by {by})"
        )
    return tuple(found)


def _target(
    reading: NodeReading, *, spec_schematic: str | None, rules: Sequence[SchematicRule]
) -> tuple[str | None, str | None]:
    """(schematic, which spec field named it), or (None, None): the node keeps its own."""
    for index, rule in enumerate(rules):
        if rule.selects(reading.labels):
            return rule.schematic, f"spec.nodeSchematics[{index}]"
    if spec_schematic:
        return spec_schematic, "spec.schematic"
    return None, None


def _known_extensions(readings: Iterable[NodeReading]) -> dict[str, frozenset[str]]:
    """Extension names of each schematic some node runs (the plain one has none)."""
    known: dict[str, frozenset[str]] = {PLAIN_SCHEMATIC: frozenset()}
    for reading in readings:
        if reading.image is not None and reading.image.schematic:
            known.setdefault(reading.image.schematic, frozenset(reading.image.extensions))
    return known


def plan_images(
    readings: Sequence[NodeReading],
    *,
    version: str,
    spec_schematic: str | None = None,
    rules: Sequence[SchematicRule] = (),
    default_factory: str,
) -> ImagePlan:
    """Each node's installer for Talos ``version``, or why the operation is refused.

    A node keeps its own schematic, platform, SecureBoot and factory; its schematic
    changes only where the spec names one for it (the first ``rules`` entry that selects
    it, else ``spec_schematic``). Refused, per node: a Talos API read that failed or is
    incomplete; a schematic annotation that disagrees with the Talos API; extensions that
    come from no schematic (upstream would fall back to the plain image and drop them);
    and ``spec.schematic`` where it is known to drop an extension the node runs (the
    plain schematic, or one another node runs without it), since only a label selector
    names a change for chosen nodes deliberately.
    """
    plan = _Planning(
        version=version,
        spec_schematic=spec_schematic,
        rules=rules,
        default_factory=default_factory,
        known=_known_extensions(readings),
    )
    problems: dict[str, list[str]] = {}
    plans: list[NodePlan] = []
    for reading in readings:
        planned = _node_plan(reading, plan)
        if isinstance(planned, NodePlan):
            plans.append(planned)
        else:
            problems.setdefault(planned, []).append(reading.name)
    if problems:
        return ImagePlan(refusals=tuple(_refusals(problems)))
    return ImagePlan(nodes=tuple(plans))


@dataclass(frozen=True, slots=True)
class _Planning:
    """What every node's plan reads: the Talos version, what the spec names, the factory
    of a node built by none, and the extensions of each schematic some node runs."""

    version: str
    spec_schematic: str | None
    rules: Sequence[SchematicRule]
    default_factory: str
    known: Mapping[str, frozenset[str]]


def _node_plan(reading: NodeReading, plan: _Planning) -> NodePlan | str:
    """One node's plan, or the first problem that refuses it, in order: its read, the
    annotation against the Talos API, extensions from no schematic, then extensions
    ``spec.schematic`` would drop. A problem is the words the refusal groups nodes by."""
    image = reading.image
    if image is None:
        return f"cannot be read through the Talos API: {reading.problem or 'no answer'}"
    disagreeing = _disagreeing(reading.annotation, image)
    if disagreeing is not None:
        return disagreeing
    target, by = _target(reading, spec_schematic=plan.spec_schematic, rules=plan.rules)
    return (
        _unsourced(image, target=target)
        or _lost(image, target=target, by=by, known=plan.known)
        or _planned(reading.name, image, target=target, by=by, plan=plan)
    )


def _disagreeing(annotation: str | None, image: NodeImage) -> str | None:
    """The Node's schematic annotation, when it names another schematic than the Talos
    API says the node runs (no annotation: nothing to compare)."""
    if annotation is None or annotation == (image.schematic or ""):
        return None
    return (
        f"disagree: the Node annotation extensions.talos.dev/schematic names "
        f"{short(annotation)}, the Talos API {short(image.schematic)}"
    )


def _unsourced(image: NodeImage, *, target: str | None) -> str | None:
    """Extensions that come from no Image Factory schematic on a node the spec names no
    schematic for: upstream would fall back to the plain image and drop them."""
    if image.schematic is not None or not image.extensions or target is not None:
        return None
    return f"run extensions that come from no Image Factory schematic ({_extensions(image)})"


def _lost(
    image: NodeImage,
    *,
    target: str | None,
    by: str | None,
    known: Mapping[str, frozenset[str]],
) -> str | None:
    """The extensions ``spec.schematic`` is known to drop from the node (the plain
    schematic, or one another node runs without them); a label selector names a change
    deliberately, so only the cluster-wide field is checked."""
    if by != "spec.schematic" or target == image.schematic:
        return None
    lost = set(image.extensions) - known.get(target or "", set(image.extensions))
    if not lost:
        return None
    return (
        f"would lose {', '.join(sorted(lost))} to spec.schematic {short(target)} "
        f"(it is known to carry {_extensions_of(known[target or ''])})"
    )


def _planned(
    name: str, image: NodeImage, *, target: str | None, by: str | None, plan: _Planning
) -> NodePlan:
    """The node's installer: its own platform, SecureBoot and factory, with the
    schematic the spec names for it, else its own, else the plain one."""
    schematic = target or image.schematic or PLAIN_SCHEMATIC
    return NodePlan(
        name=name,
        image=installer_image(
            factory=image.factory or plan.default_factory,
            platform=image.platform,
            secure_boot=image.secure_boot,
            schematic=schematic,
            version=plan.version,
        ),
        own=image,
        schematic=schematic,
        named_by=by if schematic != (image.schematic or PLAIN_SCHEMATIC) else None,
    )


_STEPS = {
    "cannot": "make the Talos API answer for them (talosctl get extensions, platformmetadata "
    "and securitystate with the cluster's talosconfig must work), then create the "
    "operation again",
    "disagree": "find out which is right (talosctl get extensions) and fix the node, then "
    "create the operation again",
    "run extensions": "name their schematic in spec.nodeSchematics (a label selector and a "
    "schematic ID), then create the operation again",
    "would lose": "to change their extensions deliberately name those nodes in "
    "spec.nodeSchematics, or unset spec.schematic to keep each node's own",
}


def _refusals(problems: Mapping[str, Sequence[str]]) -> list[str]:
    found = []
    for kind, names in problems.items():
        label = "Node" if len(names) == 1 else "Nodes"
        step = next(s for prefix, s in _STEPS.items() if kind.startswith(prefix))
        found.append(f"{label} {named(names)}: {kind}; {step}")
    return found


def group_key(image: NodeImage) -> tuple[str, bool, str, str, tuple[str, ...]]:
    """Nodes whose ``key`` is equal run the same image: the status groups them."""
    return image.key()


def single_node_statement(*, version: str, drain: bool | None) -> str:
    """What the plan and the operation of a single-node cluster say goes down, and for
    how long."""
    said = (
        f"a single-node cluster: the node reboots into Talos {version} and every workload, "
        f"the Kubernetes API and this cluster's etcd are down until it is back (a few "
        f"minutes: the install, a reboot, the kubelet's start)"
    )
    if drain:
        said += "; it is not drained (no other node could take its Pods)"
    return said
