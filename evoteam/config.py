"""Settings: one `evoteam.toml` (project, then user) overlaid by environment variables.

Precedence, lowest first: built-in defaults, `~/.config/evoteam/evoteam.toml`,
`./evoteam.toml` (searched upwards from the working directory), then `EVOTEAM_*` and the
provider keys in the environment. Missing keys never fail here: the part that needs a key
says so when it is used.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from evoteam.resources import kits_dir

PACKAGE_DIR = Path(__file__).resolve().parent
# The repository (or source tree) the package was installed from in editable mode; the
# task kits and the corpus fixtures live beside the package there.
SOURCE_ROOT = PACKAGE_DIR.parent


class Settings(BaseModel):
    """Everything configurable, with the defaults a fresh machine gets."""

    # A SQLite file (the default), or a `postgresql://` URL for a store several servers share.
    db: Path | str = Field(default_factory=lambda: Path.home() / ".evoteam" / "evoteam.db")
    knowledge_url: str | None = None
    token: str | None = None
    # An evaluation service (`evoteam bench serve --http`): bench.evaluate sends candidates there.
    bench_url: str | None = None
    # Where evaluations run (docs/bench.md, scheduling/): "local" (this process, the kit's device
    # lock), "pool" (one at a time per device of this host) or "ray" (a Ray cluster).
    bench_backend: Literal["local", "pool", "ray"] = "local"
    ray_address: str | None = None
    # The pool's devices ("cuda:0", "cpu:1"); empty: every visible GPU, or the host's cores in slots.
    bench_devices: list[str] = Field(default_factory=list)
    cores_per_eval: int = Field(default=1, ge=1, le=1024)
    # The Ray resource one evaluation asks for: "GPU", or a custom resource that nodes declare.
    ray_resource: str = "evoteam_device"
    project: str = "default"
    kits_dirs: list[Path] = Field(default_factory=lambda: [kits_dir()])
    corpus_dirs: list[Path] = Field(default_factory=list)
    # Folders besides the working directory that bench.evaluate may read candidate files from.
    candidate_dirs: list[Path] = Field(default_factory=list)
    # Kit folders named only by a project's evoteam.toml: listed, never trusted (a project file
    # may be written by an agent; trust comes from the user's own configuration or `bench trust`).
    project_kits_dirs: list[Path] = Field(default_factory=list)
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    tavily_api_key: str | None = None
    predictor: str = "auto"  # auto | anthropic | agent
    predictor_model: str = "claude-sonnet-4-5"
    search_backends: list[str] = Field(default_factory=lambda: ["local", "tavily"])
    max_artifact_bytes: int = 4 * 1024 * 1024
    max_request_bytes: int = 8 * 1024 * 1024

    @field_validator("db", mode="before")
    @classmethod
    def _db_location(cls, value):
        # A URL must stay a string: as a Path its "//" would collapse.
        return value if is_store_url(value) else Path(value)

    @property
    def remote(self) -> bool:
        return bool(self.knowledge_url)

    @property
    def state_root(self) -> Path:
        """Where this machine keeps state that belongs beside the store (the bench's secret and
        locks): the store file's folder, or evoteam's own folder when the store is a database URL."""
        if is_store_url(self.db):
            from evoteam import evoteam_home

            return evoteam_home().expanduser().resolve()
        return Path(self.db).expanduser().resolve().parent

    @property
    def store_files(self) -> list[Path]:
        """The store's files on this machine (none for a database URL)."""
        if is_store_url(self.db):
            return []
        db = Path(self.db).expanduser().resolve()
        return [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")]


def is_store_url(value: object) -> bool:
    """Whether a store location is a database URL (PostgreSQL) rather than a file path."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def _find_project_config(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / "evoteam.toml"
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


class ConfigError(Exception):
    """A configuration file is unreadable or holds a bad value."""


_ENV = {
    "EVOTEAM_DB": "db",
    "EVOTEAM_KNOWLEDGE_URL": "knowledge_url",
    "EVOTEAM_TOKEN": "token",
    "EVOTEAM_BENCH_URL": "bench_url",
    "EVOTEAM_PROJECT": "project",
    "EVOTEAM_BENCH_BACKEND": "bench_backend",
    "EVOTEAM_RAY_ADDRESS": "ray_address",
    "EVOTEAM_CORES_PER_EVAL": "cores_per_eval",
    "EVOTEAM_RAY_RESOURCE": "ray_resource",
    "EVOTEAM_PREDICTOR": "predictor",
    "EVOTEAM_PREDICTOR_MODEL": "predictor_model",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "ANTHROPIC_BASE_URL": "anthropic_base_url",
    "TAVILY_API_KEY": "tavily_api_key",
}
_ENV_LISTS = {"EVOTEAM_KITS": "kits_dirs", "EVOTEAM_CORPUS": "corpus_dirs",
              "EVOTEAM_CANDIDATE_DIRS": "candidate_dirs"}


def load_settings(cwd: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read the settings for a process started in `cwd` with environment `env`."""
    env = dict(os.environ if env is None else env)
    cwd = cwd or Path.cwd()
    values: dict = {}
    home = Path(env.get("HOME", str(Path.home())))
    user_file = home / ".config" / "evoteam" / "evoteam.toml"
    project_kits: list[Path] = []
    for path in (user_file, _find_project_config(cwd)):
        if path and path.is_file():
            data = _read_toml(path)
            base = path.parent
            for key in ("kits_dirs", "corpus_dirs", "candidate_dirs"):
                if key in data:
                    if not isinstance(data[key], list) or not all(isinstance(p, str) for p in data[key]):
                        raise ConfigError(f"{path}: {key} must be a list of folder names")
                    data[key] = [base / Path(p).expanduser() for p in data[key]]
            if "db" in data and not is_store_url(data["db"]):
                data["db"] = base / Path(data["db"]).expanduser()
            data.pop("project_kits_dirs", None)
            if path != user_file:
                # Trust comes only from the user: a project file may name kit folders (listed,
                # untrusted) but cannot add candidate folders or make a kit folder trusted.
                data.pop("candidate_dirs", None)  # a user setting only (docs/trust.md)
                # A cluster a project file names would score candidates with a clock nobody
                # trusted: where evaluations run is the user's choice (or the environment's).
                for key in ("bench_backend", "ray_address", "ray_resource"):
                    data.pop(key, None)
                project_kits = list(data.pop("kits_dirs", []))
            values.update(data)
    for var, key in _ENV.items():
        if env.get(var):
            values[key] = env[var]
    if env.get("EVOTEAM_DEVICES"):
        values["bench_devices"] = [d.strip() for d in env["EVOTEAM_DEVICES"].split(",") if d.strip()]
    for var, key in _ENV_LISTS.items():
        if env.get(var):
            extra = [Path(p).expanduser() for p in env[var].split(os.pathsep) if p]
            values[key] = extra + list(values.get(key, []))
    if "db" not in values:
        values["db"] = home / ".evoteam" / "evoteam.db"
    # The shipped kits are always trusted: a project file naming their folder cannot untrust them.
    trusted = [Path(p).resolve() for p in values.get("kits_dirs", [])] + [kits_dir().resolve()]
    values["project_kits_dirs"] = [p for p in project_kits if p.resolve() not in trusted]
    values["kits_dirs"] = list(values.get("kits_dirs", [])) + values["project_kits_dirs"]
    try:
        settings = Settings(**values)
    except ValueError as exc:
        raise ConfigError(f"bad setting: {exc}") from exc
    if kits_dir() not in settings.kits_dirs:
        settings.kits_dirs.append(kits_dir())
    return settings
