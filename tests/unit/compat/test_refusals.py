"""Only compatibility refusals are overridable, and no caller can make another one so."""

from __future__ import annotations

import pytest

from ichor.release.refusals import NEVER_OVERRIDABLE, Refusal, Refused, Rule, refuse


@pytest.mark.parametrize("rule", list(Rule))
def test_a_refusal_is_overridable_only_for_a_compatibility_rule_or_the_sites_own(
    rule: Rule,
) -> None:
    # CniPreset releases an observed Cilium from its pair for every later step: the
    # Cilium pair, passed once for all (ichor.release.steps.cni_preset_step). SitePolicy
    # is a site's own refusal (spec.policy), which the verb passes as every safety guard.
    compatibility = rule in {Rule.TALOS_KUBERNETES, Rule.CILIUM_KUBERNETES, Rule.CNI_PRESET}
    passable = compatibility or rule is Rule.SITE_POLICY
    assert refuse(rule, "x").overridable is passable
    assert (rule in NEVER_OVERRIDABLE) is not passable


@pytest.mark.parametrize(
    "rule",
    [
        Rule.UNKNOWN_VERSION,
        Rule.FORM,
        Rule.FINAL,
        Rule.DOWNGRADE,
        Rule.NOT_NEWER,
        Rule.SITE_POLICY_UNREADABLE,
        Rule.UNREADABLE_VERSION,
    ],
)
def test_a_never_overridable_refusal_cannot_be_built_overridable(rule: Rule) -> None:
    with pytest.raises(ValueError, match="never overridable"):
        Refusal(rule=rule, message="x", overridable=True)


def test_refused_carries_the_refusal() -> None:
    refusal = refuse(Rule.DOWNGRADE, "talosVersion v1.13.0 is refused.")
    with pytest.raises(Refused, match=r"talosVersion v1\.13\.0 is refused\.") as caught:
        raise Refused(refusal)
    assert caught.value.refusal is refusal
    assert str(refusal) == refusal.message


def test_rules_read_as_condition_reasons() -> None:
    assert Rule.UNKNOWN_VERSION.value == "UnknownVersion"
    assert all(rule.value[0].isupper() and " " not in rule.value for rule in Rule)
