"""Re-express the GPU kits (MLA paged decode, GDN prefill) as FlashInfer-Bench trace sets.

Writes ``task_kits/<kit>/fib/`` for each: the definition under ``definitions/<op_type>/``, FIB
workloads binding every variable axis and naming every input (index tensors, and for GDN the
normalised q/k and the decay parameters, as safetensors blobs drawn with the kit's own
``inputs.py``; the rest random or scalar), and the blobs. Run once; the output is committed.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from safetensors.torch import save_file

KITS = Path(__file__).resolve().parents[3] / "task_kits"
PLANS = {
    "mla_paged_decode_h16_ckv512_kpe64_ps1": {
        "op_type": "mla_paged", "blobs": ["kv_indptr", "kv_indices"],
        "shapes": [("b1_kv1024", 1, 1024), ("b8_kv512", 8, 512), ("b16_kv256", 16, 256)],
    },
    "gdn_prefill_qk4_v8_d128_k_last": {
        "op_type": "gdn", "blobs": ["q", "k", "A_log", "dt_bias", "cu_seqlens"],
        "shapes": [("seqs1_len128", 1, 128), ("seqs2_len64", 2, 64)],
    },
}


def main() -> None:
    for kit, plan in PLANS.items():
        folder = KITS / kit
        root = folder / "fib"
        shutil.rmtree(root, ignore_errors=True)
        definition = json.loads((folder / "definition.json").read_text())
        definition["op_type"] = plan["op_type"]
        for group in ("axes", "inputs", "outputs"):
            for name, spec in definition[group].items():
                spec.setdefault("description", name.replace("_", " "))
        spec = importlib.util.spec_from_file_location("kit_inputs", folder / "inputs.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        op, name = plan["op_type"], definition["name"]
        (root / "definitions" / op).mkdir(parents=True)
        (root / "definitions" / op / f"{name}.json").write_text(json.dumps(definition, indent=2))
        lines = []
        for seed, (uuid, n, length) in enumerate(plan["shapes"], 1):
            axes_in = {"batch_size": n, "kv_len": length} if op == "mla_paged" else {"num_seqs": n, "seq_len": length}
            values = module.make_inputs(axes_in, seed, "cpu")
            axes = {}
            for input_name, tensor in definition["inputs"].items():
                if tensor["shape"] is None:
                    continue
                for axis, size in zip(tensor["shape"], values[input_name].shape):
                    if definition["axes"][axis]["type"] == "var":
                        axes[axis] = int(size)
            if op == "gdn":
                axes["num_seqs"] = n  # also an output axis
            rel = f"blob/workloads/{op}/{name}/{name}_{uuid}.safetensors"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            save_file({k: values[k].contiguous() for k in plan["blobs"]}, str(root / rel))
            inputs = {}
            for input_name, tensor in definition["inputs"].items():
                if input_name in plan["blobs"]:
                    inputs[input_name] = {"type": "safetensors", "path": rel, "tensor_key": input_name}
                elif tensor["shape"] is None:
                    inputs[input_name] = {"type": "scalar", "value": float(values[input_name])}
                else:
                    inputs[input_name] = {"type": "random"}
            lines.append(json.dumps({"definition": name, "workload": {"uuid": uuid, "axes": axes, "inputs": inputs},
                                     "solution": None, "evaluation": None}))
        (root / "workloads" / op).mkdir(parents=True)
        (root / "workloads" / op / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
