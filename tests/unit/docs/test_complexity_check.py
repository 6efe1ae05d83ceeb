"""``make complexity`` (tests/support/complexity.py): a function over 15 fails it unless
listed, a listed one fails it when it grows, and a listed one within the limit must go."""

from __future__ import annotations

from tests.support import complexity


def branches(name: str, n: int, indent: str = "") -> str:
    """A function of complexity 1 + n: one branch per ``if``."""
    body = "".join(f"{indent}    if x == {i}:\n{indent}        return {i}\n" for i in range(n))
    return f"{indent}def {name}(x):\n{body}{indent}    return -1\n"


SOURCE = (
    branches("small", 2)
    + branches("big", 16)
    + "class Thing:\n"
    + branches("method", 15, "    ")
    + "def outer(x):\n"
    + branches("inner", 17, "    ")
    + "    return inner\n"
)


def test_figures_names_functions_methods_and_closures() -> None:
    found = dict(complexity.figures(SOURCE, "m.py"))
    assert found["m.py:small"] == 3
    assert found["m.py:big"] == 17
    assert found["m.py:Thing.method"] == 16
    assert found["m.py:outer.inner"] == 18
    assert found["m.py:outer"] == 1


def test_a_function_over_the_limit_fails_unless_listed() -> None:
    measured = {"m.py:big": 17, "m.py:small": 3, "m.py:edge": 15}
    (finding,) = complexity.findings(measured, {})
    assert finding.name == "m.py:big"
    assert "over the limit of 15" in str(finding)
    assert complexity.findings(measured, {"m.py:big": 17}) == []


def test_a_listed_function_may_shrink_but_not_grow() -> None:
    assert complexity.findings({"m.py:big": 16}, {"m.py:big": 17}) == []
    (grown,) = complexity.findings({"m.py:big": 18}, {"m.py:big": 17})
    assert "grown from the 17" in str(grown)


def test_a_listed_function_within_the_limit_or_gone_must_leave_the_list() -> None:
    (within,) = complexity.findings({"m.py:big": 15}, {"m.py:big": 17})
    assert "drop its line from ALLOWED" in str(within)
    (gone,) = complexity.findings({}, {"m.py:big": 17})
    assert gone.name == "m.py:big"


def test_the_tree_passes_and_the_list_stays_small() -> None:
    assert complexity.findings(complexity.measure(), complexity.ALLOWED) == []
    # Every function is within the limit now: one that grows past it is split, not
    # listed; listing one again is a decision, not a merge.
    assert complexity.ALLOWED == {}
