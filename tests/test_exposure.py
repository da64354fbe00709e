"""core.exposure and ui.launch: a server without sign-in listens on loopback only, unless the
operator explicitly allows a trusted network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import UserError
from core.exposure import (
    ALLOW_PUBLIC_ENV,
    ALLOWED_HOSTS_ENV,
    COOKIE_SECRET_PLACEHOLDER,
    HostRule,
    allows_public,
    auth_configured,
    cookie_secret_error,
    exposure_error,
    host_name,
    host_rule,
    is_loopback,
    launch_address,
    launch_error,
    read_launch,
    secrets_paths,
)
from core.roles import ROLES_ENV, RolesError

ROOT = Path(__file__).resolve().parent.parent
SECRET = "k3Q9vXr2mT7wLp0sYd5hNc8fBz1gJe4u"  # 32 characters
AUTH = (
    '[auth]\nredirect_uri = "https://lens.bank.example/oauth2callback"\n'
    f'cookie_secret = "{SECRET}"\n'
)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST", " 127.0.0.1 ",
     "::ffff:127.0.0.1"],
)  # fmt: skip
def test_loopback_addresses(address: str):
    assert is_loopback(address)


@pytest.mark.parametrize(
    "address", [None, "", "  ", "0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "lens.bank.example",
                "localhost.bank.example", "128.0.0.1"],
)  # fmt: skip
def test_other_addresses_are_not_loopback(address: str | None):
    assert not is_loopback(address)


def test_a_public_address_needs_sign_in_or_the_explicit_override():
    error = exposure_error("0.0.0.0", auth_configured=False, allow_public=False)
    assert error is not None and "0.0.0.0 without sign-in" in error
    assert ALLOW_PUBLIC_ENV in error and "[auth]" in error and "\n" not in error
    everywhere = exposure_error(None, auth_configured=False, allow_public=False)
    assert everywhere is not None and "every interface" in everywhere
    assert exposure_error("0.0.0.0", auth_configured=True, allow_public=False) is None
    assert exposure_error("0.0.0.0", auth_configured=False, allow_public=True) is None
    assert exposure_error("127.0.0.1", auth_configured=False, allow_public=False) is None


def test_only_the_value_1_allows_a_public_server():
    assert allows_public({ALLOW_PUBLIC_ENV: "1"})
    assert not allows_public({ALLOW_PUBLIC_ENV: "yes"})
    assert not allows_public({})


def test_the_address_comes_from_the_flag_then_the_environment_then_config_files():
    configs = [{"server": {"address": "10.0.0.1"}}, {"server": {"port": 1}}, {"browser": {}}]
    assert launch_address([], {}, configs) == "10.0.0.1"
    assert launch_address([], {}, [*configs, {"server": {"address": "127.0.0.1"}}]) == "127.0.0.1"
    assert launch_address([], {}, []) is None
    env = {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}
    assert launch_address([], env, configs) == "0.0.0.0"
    argv = ["--server.port", "9", "--server.address", "::", "--server.address=127.0.0.1"]
    assert launch_address(argv, env, configs) == "127.0.0.1"


def test_the_run_commands_own_environment_variable_sets_the_address_too():
    """click reads `streamlit run --server.address` from STREAMLIT_SERVER_ADDRESS, then from
    STREAMLIT_RUN_SERVER_ADDRESS (its auto_envvar_prefix); an empty value counts as unset."""
    configs = [{"server": {"address": "127.0.0.1"}}]
    run_env = {"STREAMLIT_RUN_SERVER_ADDRESS": "0.0.0.0"}
    assert launch_address([], run_env, configs) == "0.0.0.0"
    both = {**run_env, "STREAMLIT_SERVER_ADDRESS": "10.0.0.2"}
    assert launch_address([], both, configs) == "10.0.0.2"
    assert launch_address([], {**run_env, "STREAMLIT_SERVER_ADDRESS": ""}, configs) == "0.0.0.0"
    assert launch_address([], {"STREAMLIT_SERVER_ADDRESS": ""}, configs) == "127.0.0.1"
    assert launch_address(["--server.address", "::1"], run_env, configs) == "::1"


def test_a_config_file_may_take_the_address_from_the_environment():
    """config.toml's `address = "env:NAME"` is the value of NAME (Streamlit's env: prefix)."""
    configs = [{"server": {"address": "env:LENS_ADDRESS"}}]
    assert launch_address([], {"LENS_ADDRESS": "0.0.0.0"}, configs) == "0.0.0.0"


def test_launch_refuses_a_public_address_set_by_the_run_commands_environment_variable(
    tmp_path: Path,
):
    folders = _folders(tmp_path, config='[server]\naddress = "127.0.0.1"\n')
    refusal = launch_error([], {"STREAMLIT_RUN_SERVER_ADDRESS": "0.0.0.0"}, folders=folders)
    assert refusal is not None and "0.0.0.0 without sign-in" in refusal


def test_secrets_come_from_the_flag_the_environment_or_the_default_files(tmp_path: Path):
    defaults = [tmp_path / "home.toml", tmp_path / "project.toml"]
    assert secrets_paths([], {}, defaults) == defaults
    env = {"STREAMLIT_SECRETS_FILES": "/a.toml /b.toml"}
    assert secrets_paths([], env, defaults) == [Path("/a.toml"), Path("/b.toml")]
    argv = ["--secrets.files", "/c.toml", "--secrets.files=/d.toml"]
    assert secrets_paths(argv, env, defaults) == [Path("/c.toml"), Path("/d.toml")]
    run_env = {"STREAMLIT_RUN_SECRETS_FILES": "/e.toml"}
    assert secrets_paths([], run_env, defaults) == [Path("/e.toml")]
    assert secrets_paths([], {**run_env, **env}, defaults) == [Path("/a.toml"), Path("/b.toml")]
    configs = [{"secrets": {"files": ["/f.toml"]}}]
    assert secrets_paths([], {}, defaults, configs) == [Path("/f.toml")]
    assert secrets_paths([], run_env, defaults, configs) == [Path("/e.toml")]
    assert auth_configured([{"other": 1}, {"auth": {"client_id": "x"}}])
    assert not auth_configured([{"auth": {}}, {"auth": "x"}, {}])


def _folders(tmp_path: Path, *, config: str = "", secrets: str = "") -> list[Path]:
    home, project = tmp_path / "home" / ".streamlit", tmp_path / "project" / ".streamlit"
    for folder in (home, project):
        folder.mkdir(parents=True)
    (project / "config.toml").write_text(config)
    if secrets:
        (home / "secrets.toml").write_text(secrets)
    return [home, project]


def test_launch_refuses_a_public_address_without_auth(tmp_path: Path):
    folders = _folders(tmp_path, config='[server]\naddress = "0.0.0.0"\n')
    assert "0.0.0.0 without sign-in" in launch_error([], {}, folders=folders)
    assert launch_error([], {ALLOW_PUBLIC_ENV: "1"}, folders=folders) is None
    assert launch_error(["--server.address", "localhost"], {}, folders=folders) is None


def test_launch_with_auth_needs_a_roles_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folders = _folders(tmp_path, config='[server]\naddress = "0.0.0.0"\n', secrets=AUTH)
    roles = tmp_path / "roles.toml"
    monkeypatch.setenv(ROLES_ENV, str(roles))
    with pytest.raises(RolesError, match="no roles file"):
        launch_error([], {}, folders=folders)
    roles.write_text('admin = ["lead@bank.example"]\n')
    assert launch_error([], {}, folders=folders) is None


def test_launch_reports_a_broken_config_file(tmp_path: Path):
    folders = _folders(tmp_path, config="[server\n")
    with pytest.raises(ValueError, match="config.toml is not valid TOML"):
        launch_error([], {}, folders=folders)


def test_the_launcher_exits_2_with_one_line_before_starting(tmp_path: Path):
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", ALLOW_PUBLIC_ENV))
    }
    env["HOME"] = str(tmp_path)  # no ~/.streamlit/secrets.toml of the machine's user
    done = subprocess.run(
        [sys.executable, "-m", "ui.launch", "--server.address", "0.0.0.0", "--server.port", "9"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the server would listen on 0.0.0.0")


def test_the_example_placeholder_is_the_one_the_launcher_refuses():
    import tomllib

    example = tomllib.loads((ROOT / ".streamlit" / "secrets.toml.example").read_text())
    assert example["auth"]["cookie_secret"] == COOKIE_SECRET_PLACEHOLDER


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        (COOKIE_SECRET_PLACEHOLDER, "is the example's placeholder"),
        ("x", "too short (1 of at least 32"),
        (SECRET[:-1], "too short (31 of at least 32"),
        (None, "has no cookie_secret"),
        (12345678901234567890123456789012345, "has no cookie_secret"),
    ],
)
def test_a_guessable_cookie_secret_is_refused(secret: object, message: str):
    auth = {"redirect_uri": "https://lens.bank.example/oauth2callback"}
    if secret is not None:
        auth["cookie_secret"] = secret
    error = cookie_secret_error(auth)
    assert error is not None and message in error and "\n" not in error
    assert "secrets.token_hex(32)" in error
    assert cookie_secret_error({**auth, "cookie_secret": SECRET}) is None


def test_launch_refuses_the_example_secrets_file_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    example = (ROOT / ".streamlit" / "secrets.toml.example").read_text()
    folders = _folders(tmp_path, secrets=example)
    roles = tmp_path / "roles.toml"
    roles.write_text('admin = ["lead@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    refusal = launch_error([], {}, folders=folders)
    assert refusal is not None and "example's placeholder" in refusal
    fixed = example.replace(COOKIE_SECRET_PLACEHOLDER, SECRET)
    (folders[0] / "secrets.toml").write_text(fixed)
    assert launch_error([], {}, folders=folders) is None


def test_launch_refuses_a_shared_entra_endpoint_when_issuers_skip_email_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    shared = "https://login.microsoftonline.com/organizations/v2.0/.well-known/openid-configuration"
    folders = _folders(tmp_path, secrets=AUTH + f'server_metadata_url = "{shared}"\n')
    roles = tmp_path / "roles.toml"
    roles.write_text('admin = ["lead@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    assert launch_error([], {}, folders=folders) is None  # unverified e-mail is refused anyway
    tenant = "https://login.microsoftonline.com/0b5d3a1c-0000-4000-8000-00000000cafe/v2.0"
    env = {"GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS": tenant}
    refusal = launch_error([], env, folders=folders)
    assert refusal is not None and "tenant-specific" in refusal
    with pytest.raises(UserError, match="speaks for every tenant"):
        launch_error([], {"GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS": shared}, folders=folders)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8501", "localhost"),
        ("LocalHost", "localhost"),
        ("localhost.:8501", "localhost"),
        ("127.0.0.1:8501", "127.0.0.1"),
        ("[::1]:8501", "::1"),
        ("[::1]", "::1"),
        ("[0:0:0:0:0:0:0:1]:80", "::1"),
        ("Lens.Bank.Example", "lens.bank.example"),
        ("lens.bank.example:", "lens.bank.example"),
        (None, None),
        ("", None),
        ("::1", None),  # an IPv6 address needs brackets
        ("[::1", None),
        ("[evil.example]:80", None),
        ("localhost:port", None),
        ("localhost:\uff18\uff15", None),  # fullwidth digits are digits to str.isdigit
        ("localhost:8501:1", None),
        ("a b.example", None),
        ("ev\u0131l.example", None),
        ("user@localhost", None),
        ("localhost/evil", None),
    ],
)
def test_host_headers_parse_to_one_name_or_none(header: str | None, name: str | None):
    assert host_name(header) == name


def test_only_loopback_host_names_are_allowed_by_default():
    rule = HostRule()
    for header in ("localhost:8501", "127.0.0.1:8501", "[::1]:8501", "127.0.0.1", "LOCALHOST"):
        assert rule.allows(header), header
    for header in ("evil.example", "evil.example:8501", "localhost.evil.example", "", None,
                   "10.0.0.5:8501", "0.0.0.0:8501"):  # fmt: skip
        assert not rule.allows(header), header


def test_with_sign_in_the_redirect_host_and_the_setting_are_allowed(tmp_path: Path):
    folders = _folders(tmp_path, config='[server]\naddress = "0.0.0.0"\n', secrets=AUTH)
    launch = read_launch([], {}, folders=folders)
    rule = host_rule(launch, {ALLOWED_HOSTS_ENV: "lens-alt.bank.example, 10.0.0.7"})
    for header in ("lens.bank.example", "LENS.bank.example:443", "lens-alt.bank.example:8501",
                   "10.0.0.7:8501", "localhost:8501"):  # fmt: skip
        assert rule.allows(header), header
    for header in ("evil.example", "bank.example", "sub.lens.bank.example", "0.0.0.0:8501"):
        assert not rule.allows(header), header


def test_a_redirect_uri_with_a_port_placeholder_names_its_host(tmp_path: Path):
    secrets = '[auth]\nredirect_uri = "http://lens.bank.example:{port}/oauth2callback"\n'
    launch = read_launch([], {}, folders=_folders(tmp_path, secrets=secrets))
    assert host_rule(launch, {}).allows("lens.bank.example:8501")


def test_without_sign_in_the_redirect_host_is_not_allowed_but_a_specific_address_is(
    tmp_path: Path,
):
    folders = _folders(tmp_path, config='[server]\naddress = "10.0.0.5"\n')
    rule = host_rule(read_launch([], {}, folders=folders), {})
    assert rule.allows("10.0.0.5:8501") and not rule.allows("lens.bank.example")


@pytest.mark.parametrize("entry", ["*", "https://lens.bank.example", "lens.bank.example:8501",
                                   "*.bank.example", "a b", "[::1"])  # fmt: skip
def test_the_allowed_hosts_setting_takes_plain_names_only(tmp_path: Path, entry: str):
    launch = read_launch([], {}, folders=_folders(tmp_path))
    with pytest.raises(UserError, match=ALLOWED_HOSTS_ENV) as caught:
        host_rule(launch, {ALLOWED_HOSTS_ENV: f"lens.bank.example,{entry}"})
    assert "\n" not in str(caught.value)


def test_a_server_started_by_hand_refuses_a_foreign_host_at_run_time():
    """ui.auth.current_actor applies the rule again (`host_refusal`), for `streamlit run
    app.py` without the launcher's middleware."""
    from core.exposure import Launch, host_refusal

    loopback = Launch("127.0.0.1", None)
    assert host_refusal("localhost:8501", loopback, {}) is None
    assert "'evil.example'" in host_refusal("evil.example", loopback, {})
    assert "no host name" in host_refusal(None, loopback, {})
    signed = Launch("0.0.0.0", {"redirect_uri": "https://lens.bank.example/oauth2callback"})
    assert host_refusal("lens.bank.example", signed, {}) is None
    assert "is not a host name" in host_refusal("x", loopback, {ALLOWED_HOSTS_ENV: "http://a"})
