"""The metrics page's table, rendered from ``ichor.kube.metrics``.

Every metric the operator serves is a module-level object there: a ``prometheus_client``
metric, or a collector of ours computed when scraped (``NAME``, ``HELP``, ``LABELS``).
``families`` lists them with the names Prometheus stores (a counter's ``_total``), which
the chart's rules and dashboard tests check their expressions against.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.metrics import MetricWrapperBase

from ichor.kube import metrics


@dataclass(frozen=True)
class Family:
    #: The name as written in PromQL (a counter's ends in ``_total``).
    name: str
    type: str
    labels: tuple[str, ...]
    help: str

    @property
    def series(self) -> tuple[str, ...]:
        """Every sample name the family exposes."""
        if self.type == "histogram":
            return tuple(f"{self.name}{s}" for s in ("_bucket", "_sum", "_count"))
        return (self.name,)


def families() -> list[Family]:
    found: list[Family] = []
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            kind = str(value._type)
            name = value._name + ("_total" if kind == "counter" else "")
            found.append(
                Family(
                    name=name,
                    type=kind,
                    labels=tuple(value._labelnames),
                    help=value._documentation,
                )
            )
        elif isinstance(value, (metrics._Operations, metrics._Clusters)):
            found.append(
                Family(name=value.NAME, type="gauge", labels=value.LABELS, help=value.HELP)
            )
    return found


def render() -> str:
    out = [
        "| metric | type | labels | what it says |",
        "| --- | --- | --- | --- |",
    ]
    for family in families():
        labels = ", ".join(f"`{label}`" for label in family.labels) or "none"
        out.append(f"| `{family.name}` | {family.type} | {labels} | {family.help} |")
    out += [
        "",
        "Besides these, the process collector's `process_*` series and `python_info`.",
    ]
    return "\n".join(out)
