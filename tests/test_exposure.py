"""core.exposure and ui.launch: a server without sign-in listens on loopback only, unless the
operator explicitly allows a trusted network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.exposure import (
    ALLOW_PUBLIC_ENV,
    allows_public,
    auth_configured,
    exposure_error,
    is_loopback,
    launch_address,
    launch_error,
    secrets_paths,
)
from core.roles import ROLES_ENV, RolesError

ROOT = Path(__file__).resolve().parent.parent
AUTH = '[auth]\nredirect_uri = "http://127.0.0.1:8501/oauth2callback"\ncookie_secret = "x"\n'


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


def test_secrets_come_from_the_flag_the_environment_or_the_default_files(tmp_path: Path):
    defaults = [tmp_path / "home.toml", tmp_path / "project.toml"]
    assert secrets_paths([], {}, defaults) == defaults
    env = {"STREAMLIT_SECRETS_FILES": "/a.toml /b.toml"}
    assert secrets_paths([], env, defaults) == [Path("/a.toml"), Path("/b.toml")]
    argv = ["--secrets.files", "/c.toml", "--secrets.files=/d.toml"]
    assert secrets_paths(argv, env, defaults) == [Path("/c.toml"), Path("/d.toml")]
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
