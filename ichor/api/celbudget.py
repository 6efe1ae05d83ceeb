"""The budget of a health check's CEL expression, estimated from its parse tree before it
ever runs: what the webhook refuses at admission and the controller at evaluation.

Every node the evaluator visits is one step; a macro over a list costs the list's
worst-case length times the steps of its body (``LIST_BOUND`` when the length is not
literal). Pure: celpy's parser (lark) only; nothing is evaluated here.

More in docs/design/notes.md, "ichor/api/celbudget.py".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TypeAlias

import lark
from celpy.celparser import CELParser

#: A node of celpy's parse tree.
Tree: TypeAlias = "lark.Tree[lark.Token]"

#: The worst-case length of a list that is not a literal: the objects one check lists.
LIST_BOUND = 200
#: Evaluation steps (tree nodes visited) one expression may take: two macros nested over
#: lists not written out (200 x 200 elements) with a body of some 45 nodes, as in
#: ``objects.all(n, n.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True'))``
#: (1.6 million). cel-python visits 20,000 to 200,000 nodes a second, so the deadline
#: (``HEALTH_TIMEOUT``) may come first; the steps stop it wherever the clock stands.
BUDGET = 2_000_000
#: Levels of the parse tree: 500 exhaust the evaluator's recursion; ordinary checks take 30.
MAX_DEPTH = 200
#: Macros nested in each other's bodies: over lists not written out, three already
#: exceed the budget (200 x 200 x 200 elements).
MAX_MACRO_DEPTH = 3
#: The macros that evaluate their body once per element of the list they are called on.
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: Macros of cel-python that are not CEL's: ``reduce`` carries a value from one element
#: to the next (a string that doubles at each one), so it is refused.
REFUSED_MACROS = frozenset({"reduce"})
#: Rules that only hand their one child on: unwrapped to find what a subtree yields.
_PASS_THROUGH = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }
)


@dataclass(frozen=True)
class Estimate:
    """The worst case of one expression: evaluation steps, parse-tree depth, and macros
    nested in each other's bodies."""

    steps: int
    depth: int
    macros: int
    #: A macro this build refuses (``REFUSED_MACROS``), if the expression calls one.
    refused: str | None = None


def parse(expression: str) -> Tree:
    """The parse tree of ``expression`` (raises celpy's ``CELParseError``)."""
    return CELParser().parse(expression)


def depth(tree: Tree) -> int:
    """Levels of ``tree``, counted without recursion (a tree may be deeper than Python's
    recursion allows)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((c, level + 1) for c in node.children if isinstance(c, lark.Tree))
    return deepest


def estimate(tree: Tree) -> Estimate:
    """The worst case of ``tree``; its steps are only counted when it is no deeper than
    ``MAX_DEPTH`` (0 otherwise: it is refused for its depth)."""
    levels = depth(tree)
    if levels > MAX_DEPTH:
        return Estimate(steps=0, depth=levels, macros=0)
    steps, macros, refused = _cost(tree)
    return Estimate(steps=steps, depth=levels, macros=macros, refused=refused)


def _trees(node: Tree) -> list[Tree]:
    return [c for c in node.children if isinstance(c, lark.Tree)]


def _method(node: Tree) -> str | None:
    """The name a ``member_dot_arg`` node calls (``objects.all(...)``: ``all``)."""
    if node.data != "member_dot_arg" or len(node.children) < 2:
        return None
    name = node.children[1]
    return str(name) if isinstance(name, lark.Token) else None


def _macro_parts(node: Tree) -> tuple[Tree, Tree] | None:
    """The list and the body of a macro call (``list.all(x, body)``), if ``node`` is one."""
    if _method(node) not in MACROS or len(node.children) != 3:
        return None
    target, arguments = node.children[0], node.children[2]
    if not isinstance(target, lark.Tree) or not isinstance(arguments, lark.Tree):
        return None
    given = _trees(arguments)
    if len(given) != 2:
        return None
    return target, given[1]


def _cost(node: Tree) -> tuple[int, int, str | None]:
    """Steps, macro depth and any refused macro of ``node``'s subtree."""
    method = _method(node)
    if method in REFUSED_MACROS:
        return 1, 0, method
    parts = _macro_parts(node)
    if parts is not None:
        target, body = parts
        on, on_macros, on_refused = _cost(target)
        each, inner, body_refused = _cost(body)
        # the node, its list once, its body once per element (and one step each for the
        # element's binding, a margin over what the evaluator counts)
        steps = 1 + on + _length(target) * (each + 1)
        return steps, max(on_macros, inner + 1), on_refused or body_refused
    steps, macros, refused = 1, 0, None
    for child in _trees(node):
        more, deeper, child_refused = _cost(child)
        steps += more
        macros = max(macros, deeper)
        refused = refused or child_refused
    if method == "min":  # cel-python's list.min(): a pass over the list
        steps += _length(node.children[0]) if isinstance(node.children[0], lark.Tree) else 0
    if node.data == "relation" and len(node.children) == 2:
        operator, right = node.children
        if isinstance(operator, lark.Tree) and operator.data == "relation_in":
            # ``x in list`` compares x with each element
            steps += _length(right) if isinstance(right, lark.Tree) else 0
    return steps, macros, refused


def _unwrapped(node: Tree) -> Tree:
    """``node`` without the rules that only hand their one child on."""
    while node.data in _PASS_THROUGH:
        inner = _trees(node)
        if len(inner) != 1 or len(node.children) != 1:
            break
        node = inner[0]
    return node


def _length(node: Tree) -> int:
    """The worst-case length of the list (or the keys of the map) ``node`` yields."""
    node = _unwrapped(node)
    inner = _trees(node)
    if node.data == "list_lit":
        return len(_trees(inner[0])) if inner else 0
    if node.data == "map_lit":
        return len(_trees(inner[0])) // 2 if inner else 0
    if node.data == "addition" and len(inner) == 2 and inner[0].data == "addition_add":
        # list + list: both lengths
        left = _trees(inner[0])
        return (_length(left[0]) if left else LIST_BOUND) + _length(inner[1])
    if node.data == "expr" and len(inner) == 3:
        # cond ? a : b
        return max(_length(inner[1]), _length(inner[2]))
    if _method(node) in ("map", "filter") and _macro_parts(node) is not None:
        target = node.children[0]
        return _length(target) if isinstance(target, lark.Tree) else LIST_BOUND
    return LIST_BOUND


MACRO_NAMES = "all, exists, exists_one, map, filter"


def problem(estimate: Estimate) -> str | None:
    """Why an expression of this estimate is refused, as a verb phrase that follows
    ``health check "<name>"``; None when it is within the budget."""
    if estimate.depth > MAX_DEPTH:
        return (
            f"nests {estimate.depth} levels deep, more than the {MAX_DEPTH} the evaluator "
            "takes; write it with fewer nested parentheses, operators or field selections"
        )
    if estimate.refused is not None:
        return (
            f"calls {estimate.refused}, which is not part of CEL (an extension of cel-python "
            f"that carries a value from one element to the next); use {MACRO_NAMES}"
        )
    if estimate.macros > MAX_MACRO_DEPTH:
        return (
            f"nests {estimate.macros} macros ({MACRO_NAMES}) in each other's bodies, more "
            f"than the {MAX_MACRO_DEPTH} allowed; nest fewer macros"
        )
    if estimate.steps > BUDGET:
        return (
            f"is estimated at {estimate.steps:,} evaluation steps, over the budget of "
            f"{BUDGET:,} (a macro over a list of up to {LIST_BOUND} items multiplies the "
            "steps of its body); simplify it, or nest fewer macros"
        )
    return None


@functools.lru_cache(maxsize=512)
def judge(expression: str) -> str | None:
    """``problem`` of ``expression``, or that it does not compile (then it cannot be
    estimated); None when it is within the budget. Kept for the last 512 expressions:
    both halves of the webhook judge each write, and a parse of 1,024 characters takes
    some 10 to 30 ms."""
    try:
        tree = parse(expression)
    except Exception as error:  # celpy raises parse and lark errors of many classes
        first = str(error).strip().splitlines()
        said = first[0][:200] if first else type(error).__name__
        return f"does not compile ({said}), so its cost cannot be estimated; fix its expression"
    return problem(estimate(tree))
