"""kopf works out the operator's identity at every start; a uid with no name must not end it.

kopf takes ``POD_ID`` (the chart sets the Pod's name) and otherwise ``getpass.getuser()``,
which raises for a uid without a passwd entry when no ``USER``/``LOGNAME`` is set: the
image's own user has an entry, an arbitrary ``runAsUser`` has none.
"""

from __future__ import annotations

import os
import pwd
from typing import NoReturn

import pytest
from kopf._core.engines import peering  # kopf's own identity rule, not a copy of it

from ichor import operator
from ichor.settings import Settings

NAME_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")


def _no_passwd_entry(uid: int) -> NoReturn:
    raise KeyError(f"getpwuid(): uid not found: {uid}")


@pytest.fixture
def nameless(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This process as uid 65532 in the image before the fix: no entry, no name variable."""
    for name in (*NAME_VARIABLES, "POD_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", _no_passwd_entry)
    return monkeypatch


def test_kopf_itself_fails_for_a_nameless_uid(nameless: pytest.MonkeyPatch) -> None:
    """The failure this guards against, as kopf has it (so the guard is not for nothing)."""
    with pytest.raises((KeyError, OSError)):
        peering.detect_own_id(manual=False)


def test_a_nameless_uid_is_named_after_its_number(nameless: pytest.MonkeyPatch) -> None:
    operator.name_the_user(Settings.from_env())
    assert os.environ["USER"] == f"uid{os.getuid()}"
    identity = peering.detect_own_id(manual=False)
    assert identity.startswith(f"uid{os.getuid()}@")


def test_pod_id_wins_and_nothing_is_set(nameless: pytest.MonkeyPatch) -> None:
    nameless.setenv("POD_ID", "ichor-7c9d5b6f4-x2x8q")
    operator.name_the_user(Settings.from_env())
    assert "USER" not in os.environ
    assert peering.detect_own_id(manual=False) == "ichor-7c9d5b6f4-x2x8q"


def test_a_user_with_a_name_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*NAME_VARIABLES, "POD_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd(("ichor",) + ("x",) * 6))
    operator.name_the_user(Settings.from_env())
    assert "USER" not in os.environ
    assert peering.detect_own_id(manual=False).startswith("ichor@")
