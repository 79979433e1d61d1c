"""Settings: the `Settings` model, built from the values evoteam/configsource.py reads (one
`evoteam.toml`, project then user, overlaid by environment variables). Missing keys never fail
here: the part that needs a key says so when it is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from evoteam.configsource import ConfigError, is_store_url, setting_values, state_root
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
        return state_root(self.db)

    @property
    def store_files(self) -> list[Path]:
        """The store's files on this machine (none for a database URL)."""
        if is_store_url(self.db):
            return []
        db = Path(self.db).expanduser().resolve()
        return [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")]


def load_settings(cwd: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read the settings for a process started in `cwd` with environment `env`."""
    values = setting_values(cwd, env)
    try:
        settings = Settings(**values)
    except ValueError as exc:
        raise ConfigError(f"bad setting: {exc}") from exc
    if kits_dir() not in settings.kits_dirs:
        settings.kits_dirs.append(kits_dir())
    return settings


__all__ = ["ConfigError", "Settings", "is_store_url", "load_settings", "setting_values"]
