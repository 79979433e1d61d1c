"""The kit and the held-out split on Ray (issue #26): a node without the caller's kit gets it by
content hash from the object store; every node measures the caller's held-out set, never its own.
On the session cluster (tests/support/ray_cluster.py)."""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import tarfile

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'evoteam[ray]' (.ci/run does)")

from evoteam.config import Settings  # noqa: E402
from evoteam.errors import DomainError  # noqa: E402
from evoteam.servers.bench.formats.heldout_key import heldout_set_id  # noqa: E402
from evoteam.servers.bench.formats.kit import Kit  # noqa: E402
from evoteam.servers.bench.scheduling import kitship  # noqa: E402
from evoteam.servers.bench.scheduling.dispatch import close_backends, evaluate_scheduled  # noqa: E402
from tests.bench.conftest import RMSNORM  # noqa: E402
from tests.support.ray_cluster import make_kit  # noqa: E402

HIDDEN = [512, 1024, 2048, 4096]


def shipped_kit(root, name: str):
    """A kit only the caller has, with one held-out workload drawn from four hidden sizes."""
    kit = make_kit(root, name)
    manifest = json.loads((kit / "kit.json").read_text())
    manifest["heldout"] = {"count": 1, "axes": {"num_tokens": {"choices": [32]}, "hidden_size": {"choices": HIDDEN}}}
    (kit / "kit.json").write_text(json.dumps(manifest))
    return kit


def hidden_size(kit: Kit, secret: bytes) -> int:
    return kit.heldout_workloads(secret)[0].axes["hidden_size"]


@pytest.fixture
def caller(ray_cluster, tmp_path):
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"], bench_backend="ray")
    yield settings
    close_backends()


async def test_a_node_without_the_kit_gets_it_by_hash_and_measures_the_callers_heldout_set(
        caller, ray_cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("EVOTEAM_HELDOUT_KEY", raising=False)
    monkeypatch.delenv("EVOTEAM_HELDOUT_KEY_FILE", raising=False)
    name = "rmsnorm_shipped_" + secrets.token_hex(3)  # no node has it, nor a cached copy
    kit = Kit.load(shipped_kit(tmp_path / "kits", name))
    # The nodes' own held-out key (made here when no test made it yet), and a caller key that
    # draws another hidden size: a node that used its own key would measure another shape.
    node_secret_file = ray_cluster.home / "node-state" / "bench" / "heldout.secret"
    node_secret_file.parent.mkdir(parents=True, exist_ok=True)
    if not node_secret_file.exists():
        node_secret_file.write_text(secrets.token_hex(32))
    node_secret = bytes.fromhex(node_secret_file.read_text().strip())
    while True:
        mine = secrets.token_bytes(32)
        if hidden_size(kit, mine) != hidden_size(kit, node_secret):
            break
    (tmp_path / "state" / "bench").mkdir(parents=True)
    (tmp_path / "state" / "bench" / "heldout.secret").write_text(mine.hex())
    # Passes only on the caller's held-out shape (and the dev shape, 1024, for the dev split).
    wanted = hidden_size(kit, mine)
    picky = RMSNORM.replace("def run(", "def _run(") + (
        f"\ndef run(hidden_states, weight, eps):\n"
        f"    assert hidden_states.shape[-1] in ({wanted}, 1024), hidden_states.shape\n"
        f"    return _run(hidden_states, weight, eps)\n")
    results = await asyncio.gather(*[evaluate_scheduled(caller, name, code=picky + f"\n# {i}\n", split="heldout")
                                     for i in range(4)])
    assert all(r.status == "PASSED" for r in results), [r.message for r in results]
    assert len({r.metrics["placement"]["node"] for r in results}) == 2  # both nodes measured it
    assert {r.metrics["heldout_set"] for r in results} == {heldout_set_id(mine)} != {heldout_set_id(node_secret)}
    cached = kitship.cached(ray_cluster.home / "node-state" / "bench", kit.content_hash, name)
    assert Kit.load(cached).content_hash == kit.content_hash  # unpacked once into the nodes' cache
    again = await evaluate_scheduled(caller, name, code=picky)
    assert again.status == "PASSED" and again.metrics["kit_hash"] == kit.content_hash


async def test_without_a_shipment_a_node_that_lacks_the_kit_names_it(ray_cluster, tmp_path, monkeypatch):
    kit = make_kit(tmp_path / "kits", "rmsnorm_nowhere_" + secrets.token_hex(3))
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent], bench_backend="ray")
    monkeypatch.setattr(kitship, "MAX_SHIPPED_BYTES", 10)  # too large to ship: the node must have it
    try:
        with pytest.raises(DomainError, match=f"no kit named '{kit.name}'"):
            await evaluate_scheduled(settings, kit.name, code=RMSNORM)
    finally:
        close_backends()


def test_an_unpacked_kit_whose_hash_differs_is_refused_and_removed(tmp_path):
    kit = Kit.load(make_kit(tmp_path / "kits", "rmsnorm_tampered"))
    archive = kitship.pack(kit.root)
    state = tmp_path / "node"
    assert kitship.unpack(state, kit.content_hash, kit.name, archive) == kitship.cached(state, kit.content_hash,
                                                                                         kit.name)
    other = "sha256:" + "0" * 64  # the archive is not the kit of this hash
    with pytest.raises(DomainError, match="not the caller's"):
        kitship.unpack(state, other, kit.name, archive)
    assert not kitship.cached(state, other, kit.name).exists()
    # An archive that reaches out of the cache is refused before anything is written there.
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DomainError, match="could not be unpacked"):
        kitship.unpack(state, "sha256:" + "1" * 64, "evil", evil.getvalue())
    assert not list(tmp_path.rglob("escaped.txt"))


async def test_a_runner_loads_a_kit_folder_only_from_its_nodes_cache(tmp_path):
    from evoteam.servers.bench.scheduling.jobs import EvalJob
    from evoteam.servers.bench.scheduling.slot import evaluate_job

    kit = Kit.load(make_kit(tmp_path / "elsewhere", "rmsnorm_astray"))
    settings = Settings(db=tmp_path / "node" / "kb.db", kits_dirs=[])
    job = EvalJob(kit=kit.name, kit_hash=kit.content_hash, code=RMSNORM, kit_dir=str(kit.root))
    reply = await evaluate_job(settings, job)
    assert not reply.ok and reply.refused and "not in this node's kit cache" in reply.error


async def test_a_ray_worker_keeps_its_slot_runner_for_its_next_evaluation(ray_cluster, tmp_path):
    """Sequential evaluations land on Ray workers that already ran one (Ray reuses idle workers of
    a function); such a worker's runner is the one it kept, not a fresh start."""
    from tests.support.ray_cluster import KIT

    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[ray_cluster.kits], bench_backend="ray")
    try:
        runners = [(await evaluate_scheduled(settings, KIT, code=RMSNORM + f"\n# {i}\n")).metrics["placement"]
                   for i in range(4)]
    finally:
        close_backends()
    assert "reused" in [p["runner"] for p in runners], runners


def test_a_node_whose_kit_cache_cannot_be_made_says_so_in_one_line(tmp_path):
    kit = Kit.load(make_kit(tmp_path / "kits", "rmsnorm_nowhere"))
    archive = kitship.pack(kit.root)
    state = tmp_path / "node"
    state.write_text("a file where the node's state folder should be")  # mkdir under it fails
    with pytest.raises(DomainError, match="no room in this node's kit cache"):
        kitship.unpack(state, kit.content_hash, kit.name, archive)
