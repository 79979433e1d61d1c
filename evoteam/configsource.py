"""Where the settings come from: `evoteam.toml` files and the environment, merged into plain
values with the standard library only. evoteam/config.py builds the `Settings` model from them;
the quick local reads (evoteam/servers/knowledge/quickread.py) need only the store's location,
so they read it here and never import pydantic (issue 24: a read answers within 0.2 s).

Precedence, lowest first: built-in defaults, `~/.config/evoteam/evoteam.toml`,
`./evoteam.toml` (searched upwards from the working directory), then `EVOTEAM_*` and the
provider keys in the environment.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from evoteam.resources import kits_dir


def is_store_url(value: object) -> bool:
    """Whether a store location is a database URL (PostgreSQL) rather than a file path."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def state_root(db: Path | str) -> Path:
    """Where this machine keeps state that belongs beside the store `db` (the bench's secret,
    locks and queues): the store file's folder, or evoteam's own folder for a database URL."""
    if is_store_url(db):
        from evoteam import evoteam_home

        return evoteam_home().expanduser().resolve()
    return Path(db).expanduser().resolve().parent


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


def setting_values(cwd: Path | None = None, env: dict[str, str] | None = None) -> dict:
    """The raw setting values for a process started in `cwd` with environment `env`, before
    the model checks them (a file that cannot be read or parsed is a ConfigError already)."""
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
    return values
