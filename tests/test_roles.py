"""core.roles: the roles file (parsing, one-line errors) and who gets which role when signed in."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.access import Role
from core.errors import UserError
from core.roles import (
    ROLES_ENV,
    RoleRules,
    RolesError,
    SignInRefused,
    actor_for_claims,
    load_roles,
    parse_roles,
    read_roles_file,
    roles_path,
    unverified_email_issuers,
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


def test_a_listed_verified_email_becomes_a_signed_in_actor(rules: RoleRules):
    claims = {"email": "Asha@Bank.example", "name": "Asha", "email_verified": True}
    actor = actor_for_claims(claims, rules)
    assert (actor.user, actor.role, actor.signed_in) == ("asha@bank.example", Role.REVIEWER, True)
    for verified in ("true", "TRUE", "True"):  # some providers send the claim as a string
        claims = {"email": "lead@bank.example", "email_verified": verified}
        assert actor_for_claims(claims, rules).role is Role.ADMIN


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"email": "stranger@elsewhere.example", "email_verified": True}, "is not on the list"),
        ({"name": "No Mail"}, "did not include an e-mail address"),
        ({"email": ""}, "did not include an e-mail address"),
        ({"email": ["lead@bank.example"]}, "did not include an e-mail address"),
        ({"email": "lead@bank.example", "email_verified": False}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": "false"}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": "False"}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": "FALSE"}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": 1}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": "yes"}, "is not verified"),
        ({"email": "lead@bank.example", "email_verified": None}, "is not verified"),
        ({"email": "lead@bank.example"}, "did not say whether lead@bank.example is verified"),
        ({"email": "lead@bank.example", "iss": ["a"]}, "did not say whether"),
        ({"email": "a\uff20x@bank.example", "email_verified": True}, "is not plain ASCII"),
    ],
)
def test_identities_the_roles_file_does_not_admit_are_refused(
    rules: RoleRules, claims: dict, message: str
):
    with pytest.raises(SignInRefused, match=message):
        actor_for_claims(claims, rules)


ENTRA = "https://login.microsoftonline.com/0b5d3a1c-0000-4000-8000-00000000cafe/v2.0"


def test_an_issuer_that_never_sends_email_verified_is_trusted_only_when_named():
    rules = parse_roles(ROLES)
    claims = {"email": "lead@bank.example", "iss": ENTRA}
    with pytest.raises(SignInRefused, match="did not say whether"):
        actor_for_claims(claims, rules)
    issuers = unverified_email_issuers({"GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS": ENTRA})
    assert issuers == frozenset({ENTRA})
    assert actor_for_claims(claims, rules, unverified_issuers=issuers).role is Role.ADMIN
    other = {"email": "lead@bank.example", "iss": ENTRA.replace("cafe", "beef")}
    with pytest.raises(SignInRefused, match="did not say whether"):
        actor_for_claims(other, rules, unverified_issuers=issuers)
    said_no = {**claims, "email_verified": False}  # a named issuer that says "no" is believed
    with pytest.raises(SignInRefused, match="is not verified"):
        actor_for_claims(said_no, rules, unverified_issuers=issuers)


def test_the_unverified_issuer_setting_lists_exact_tenant_issuers():
    env = "GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS"
    assert unverified_email_issuers({}) == frozenset()
    assert unverified_email_issuers({env: f" {ENTRA} , https://idp.bank.example/ ,"}) == {
        ENTRA,
        "https://idp.bank.example/",
    }
    for shared in ("common", "organizations", "consumers", "Common", "{tenantid}"):
        with pytest.raises(UserError, match="tenant") as caught:
            unverified_email_issuers({env: f"https://login.microsoftonline.com/{shared}/v2.0"})
        assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="https"):
        unverified_email_issuers({env: "http://login.microsoftonline.com/tenant/v2.0"})


KELVIN = "\u212a"  # the Kelvin sign: .lower() makes it a Latin "k"


@pytest.mark.parametrize(
    ("email", "role"),
    [
        ("LEAD@BANK.EXAMPLE", Role.ADMIN),
        ("\uff2c\uff25\uff21\uff24@bank.example", None),  # fullwidth LEAD is not LEAD
        (f"lead@ban{KELVIN}.example", None),  # a domain must be plain ASCII as sent
        ("lead@bank\uff0eexample", None),  # a fullwidth full stop in the domain
        ("someone@b\u0430nk.example", None),  # a Cyrillic "a"
        ("lead\uff20evil.example@bank.example", None),  # a fullwidth "@" is no "@" either
    ],
)
def test_addresses_compare_exactly_with_plain_ascii_domains(email: str, role: Role | None):
    assert parse_roles(ROLES).role_for(email) is role


def test_case_folding_is_for_ascii_letters_only():
    rules = parse_roles('admin = ["strasse@bank.example"]')
    assert rules.role_for("STRA\u00dfE@bank.example") is None  # "ß" is not "ss"
    assert parse_roles('admin = ["Stra\u00dfe@bank.example"]').admin == (
        "stra\u00dfe@bank.example",
    )


def test_a_sign_in_whose_domain_is_not_plain_ascii_is_refused():
    claims = {"email": f"lead@ban{KELVIN}.example", "email_verified": True}
    with pytest.raises(SignInRefused, match="not plain ASCII"):
        actor_for_claims(claims, parse_roles(ROLES))


@pytest.mark.parametrize("entry", [f"*@ban{KELVIN}.example", f"lead@ban{KELVIN}.example",
                                   "*@b\u0430nk.example"])  # fmt: skip
def test_roles_entries_whose_domain_is_not_plain_ascii_are_refused(entry: str):
    with pytest.raises(RolesError, match="not plain ASCII"):
        parse_roles(f'viewer = ["{entry}"]')


def test_the_roles_file_is_known_by_the_digest_of_its_bytes(tmp_path: Path):
    path = tmp_path / "roles.toml"
    path.write_text('admin = ["lead@bank.example"]\n')
    first = read_roles_file(path)
    path.write_text('admin = ["head@bank.example"]\n')  # same size
    second = read_roles_file(path)
    assert first.digest != second.digest and len(first.digest) == 64
    path.write_text('admin = ["lead@bank.example"]\n')
    assert read_roles_file(path) == first


# Issue 38: Unicode folding let look-alike local parts sign in as a listed address.
LOOK_ALIKES = """
admin = ["lead@bank.example", "fiona@partner.example", "strasse@partner.example"]
reviewer = ["*@bank.example"]
"""


@pytest.mark.parametrize(
    "email",
    [
        "\uff4c\uff45\uff41\uff44@bank.example",  # fullwidth "lead"
        "\uff2c\uff25\uff21\uff24@bank.example",  # fullwidth "LEAD"
        "\u24db\u24d4\u24d0\u24d3@bank.example",  # circled "lead"
        "\ufb01ona@partner.example",  # the "fi" ligature
        "\u212aate@bank.example",  # the Kelvin sign, which folds to "k"
        "STRA\u00dfE@partner.example",  # "ß", which case folding makes "ss"
        "le\u0430d@bank.example",  # a Cyrillic "a"
        "lead\u200b@bank.example",  # a zero-width space
    ],
)
def test_a_look_alike_local_part_borrows_no_listed_address_or_domain(email: str):
    rules = parse_roles(LOOK_ALIKES)
    assert rules.role_for(email) is None  # neither the address it imitates nor *@its domain
    with pytest.raises(SignInRefused, match="is not on the list") as caught:
        actor_for_claims({"email": email, "email_verified": True}, rules)
    message = str(caught.value)
    assert "plain ASCII" in message and "\n" not in message


def test_local_parts_compare_exactly_but_for_the_case_of_ascii_letters():
    rules = parse_roles(
        'admin = ["Zo\u00eb@Partner.example", "\uff4c\uff45\uff41\uff44@bank.example"]'
    )
    assert rules.admin == ("zo\u00eb@partner.example", "\uff4c\uff45\uff41\uff44@bank.example")
    assert rules.role_for("zo\u00eb@partner.example") is Role.ADMIN  # listed exactly
    assert rules.role_for("ZO\u00eb@PARTNER.EXAMPLE") is Role.ADMIN  # ASCII letters fold
    assert rules.role_for("zo\u00cb@partner.example") is None  # "Ë" is not "ë"
    assert rules.role_for("zoe\u0308@partner.example") is None  # the same letter, decomposed
    assert rules.role_for("\uff4c\uff45\uff41\uff44@bank.example") is Role.ADMIN  # only itself
    assert rules.role_for("lead@bank.example") is None
    actor = actor_for_claims({"email": "Zo\u00eb@partner.example", "email_verified": True}, rules)
    assert (actor.user, actor.role) == ("zo\u00eb@partner.example", Role.ADMIN)
