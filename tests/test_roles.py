"""core.roles: the roles file (parsing, one-line errors) and who gets which role when signed in."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.access import Role
from core.roles import (
    ROLES_ENV,
    RoleRules,
    RolesError,
    SignInRefused,
    actor_for_claims,
    load_roles,
    parse_roles,
    roles_path,
)

ROLES = """
admin = ["Lead@Bank.example"]
reviewer = ["*@bank.example", "auditor@partner.example"]
viewer = ["*@partner.example"]
"""
EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "roles.toml.example"


@pytest.fixture()
def rules() -> RoleRules:
    return parse_roles(ROLES)


@pytest.mark.parametrize(
    ("email", "role"),
    [
        ("lead@bank.example", Role.ADMIN),  # listed as admin and matched by *@bank: highest wins
        ("LEAD@BANK.EXAMPLE", Role.ADMIN),  # case-insensitive
        ("  asha@Bank.Example ", Role.REVIEWER),
        ("auditor@partner.example", Role.REVIEWER),
        ("someone@partner.example", Role.VIEWER),
        ("someone@sub.bank.example", None),  # a domain pattern is that domain only
        ("bank.example@evil.example", None),
        ("x@evil.example@bank.example", None),  # two @: not an address at bank.example
        ("@bank.example", None),
        ("stranger@elsewhere.example", None),
    ],
)
def test_highest_matching_role_wins(rules: RoleRules, email: str, role: Role | None):
    assert rules.role_for(email) is role


def test_entries_are_stored_in_lower_case(rules: RoleRules):
    assert rules.admin == ("lead@bank.example",)
    assert rules.patterns(Role.VIEWER) == ("*@partner.example",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("admin = [", "is not valid TOML"),
        ('admins = ["a@b.example"]', "the key 'admins'; the only keys are admin, reviewer"),
        ('admin = "a@b.example"', "admin must be a list of strings"),
        ("viewer = [1]", "viewer must be a list of strings"),
        ('reviewer = ["asha"]', "'asha' under reviewer is neither an e-mail address"),
        ('viewer = ["*"]', "'*' under viewer is neither"),
        ('viewer = ["*@*.example"]', "under viewer is neither"),
        ('viewer = ["a b@bank.example"]', "under viewer is neither"),
        ("admin = []", "lists nobody"),
        ("", "lists nobody"),
        ("[admin]\nusers = []", "admin must be a list of strings"),
    ],
)
def test_malformed_roles_files_say_what_to_fix(text: str, message: str):
    with pytest.raises(RolesError, match="the roles file") as caught:
        parse_roles(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_roles_file_says_where_to_copy_the_example(tmp_path: Path):
    with pytest.raises(RolesError, match=r"no roles file at .*: copy data/roles.toml.example"):
        load_roles(tmp_path / "roles.toml")


def test_a_roles_file_that_is_not_utf8_is_refused(tmp_path: Path):
    path = tmp_path / "roles.toml"
    path.write_bytes(b'admin = ["\xff@bank.example"]')
    with pytest.raises(RolesError, match="not UTF-8"):
        load_roles(path)


def test_the_committed_example_parses():
    rules = load_roles(EXAMPLE)
    assert rules.admin and rules.reviewer and rules.viewer


def test_roles_path_follows_the_environment(monkeypatch, tmp_path: Path):
    monkeypatch.delenv(ROLES_ENV, raising=False)
    assert roles_path().parts[-2:] == ("data", "roles.toml")
    monkeypatch.setenv(ROLES_ENV, str(tmp_path / "team.toml"))
    assert roles_path() == tmp_path / "team.toml"


def test_a_listed_email_becomes_a_signed_in_actor(rules: RoleRules):
    actor = actor_for_claims({"email": "Asha@Bank.example", "name": "Asha"}, rules)
    assert (actor.user, actor.role, actor.signed_in) == ("asha@bank.example", Role.REVIEWER, True)
    verified = actor_for_claims({"email": "lead@bank.example", "email_verified": True}, rules)
    assert verified.role is Role.ADMIN


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"email": "stranger@elsewhere.example"}, "is not on the list of people"),
        ({"name": "No Mail"}, "did not include an e-mail address"),
        ({"email": ""}, "did not include an e-mail address"),
        ({"email": ["lead@bank.example"]}, "did not include an e-mail address"),
        ({"email": "lead@bank.example", "email_verified": False}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": "false"}, "is not verified"),
    ],
)
def test_identities_the_roles_file_does_not_admit_are_refused(
    rules: RoleRules, claims: dict, message: str
):
    with pytest.raises(SignInRefused, match=message):
        actor_for_claims(claims, rules)
