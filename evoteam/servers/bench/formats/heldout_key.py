"""Where the held-out secret comes from.

The held-out workloads are derived from a secret; whoever reads it can compute the split. The
default keeps it in the bench's state folder (`<store folder>/bench/heldout.secret`, 0600),
which the candidate sandbox and `bench.evaluate(candidate_path=...)` refuse to read — but an
agent session running as the same OS user can still open it with its own file tools. To take
the secret out of the agents' reach, keep it where only the bench can read it and point the
bench there:

- `EVOTEAM_HELDOUT_KEY_FILE=/path` — a file owned by a separate bench user (mode 0600) when the
  bench runs as that user or as a service on another host;
- `EVOTEAM_HELDOUT_KEY=<hex>` — the key itself, for a bench service configured by an operator.

Either is read only by the bench process; see docs/bench.md ("Held-out secrecy") for the limits.
"""

from __future__ import annotations

import os
from pathlib import Path

from evoteam.errors import DomainError


def external_heldout_key(env: dict[str, str] | None = None) -> bytes | None:
    """The operator-supplied held-out key, or None to use the state-folder secret."""
    env = os.environ if env is None else env
    raw = env.get("EVOTEAM_HELDOUT_KEY")
    where = "EVOTEAM_HELDOUT_KEY"
    if not raw and env.get("EVOTEAM_HELDOUT_KEY_FILE"):
        where = env["EVOTEAM_HELDOUT_KEY_FILE"]
        try:
            raw = Path(where).expanduser().read_text().strip()
        except OSError as exc:
            raise DomainError(f"cannot read the held-out key file {where}: {exc.strerror}; the bench needs read "
                              f"access to it (EVOTEAM_HELDOUT_KEY_FILE)") from None
    if not raw:
        return None
    try:
        key = bytes.fromhex(raw.strip())
    except ValueError:
        raise DomainError(f"the held-out key in {where} is not hex: make one with "
                          f"`python -c 'import secrets; print(secrets.token_hex(32))'`") from None
    if len(key) < 16:
        raise DomainError(f"the held-out key in {where} is too short: use at least 16 bytes (32 hex digits)")
    return key


def heldout_set_id(key: bytes) -> str:
    """A public name for the held-out set a key makes: the same key (one per shared store, held
    by the evaluation service) gives the same name, so held-out results say whether they are
    comparable. A one-way digest: the name tells nothing about the key."""
    import hashlib

    return "hs_" + hashlib.sha256(b"evoteam held-out set\0" + key).hexdigest()[:12]
