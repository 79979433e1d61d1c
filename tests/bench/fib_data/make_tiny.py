"""Writes the tiny FlashInfer-Bench trace set under tiny/ (run once; the output is committed).

One CPU definition, segment_sum_d8: per-segment row sums of x scaled by `scale`, with the
segments given by a `cu_seqlens` index tensor stored as a safetensors blob (as FIB stores real
index tensors). Solutions: a destination-passing Python one (no destination_passing_style field:
FIB's default), a value-returning one, a C++ one (binding torch), a C++ one that does not
compile, a C++ one with FIB's default binding (tvm-ffi), a CUDA one (needs a GPU) and a
wrong one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).parent / "tiny"
DEF = "segment_sum_d8"
OP = "segment_sum"

REFERENCE = '''import torch


def run(x, cu_seqlens, scale):
    n = cu_seqlens.shape[0] - 1
    y = torch.zeros((n, x.shape[1]), dtype=torch.float32)
    for s in range(n):
        lo, hi = int(cu_seqlens[s]), int(cu_seqlens[s + 1])
        y[s] = x[lo:hi].sum(dim=0) * scale
    return y
'''

DPS = '''import torch


def run(x, cu_seqlens, scale, y):
    sums = torch.zeros((x.shape[0] + 1, x.shape[1]), dtype=torch.float64)
    sums[1:] = torch.cumsum(x.double(), dim=0)
    idx = cu_seqlens.long()
    y.copy_(((sums[idx[1:]] - sums[idx[:-1]]) * scale).float())
'''

RETURNING = '''import torch


def run(x, cu_seqlens, scale):
    idx = cu_seqlens.long()
    segment = torch.repeat_interleave(torch.arange(idx.numel() - 1), idx[1:] - idx[:-1])
    y = torch.zeros((idx.numel() - 1, x.shape[1]), dtype=torch.float32)
    y.index_add_(0, segment, x)
    return y * scale
'''

WRONG = '''def run(x, cu_seqlens, scale, y):
    y.zero_()
'''

CPP = '''#include <torch/extension.h>

// Destination-passing: y[s] = scale * sum of rows cu_seqlens[s] .. cu_seqlens[s+1] of x.
void segment_sum(torch::Tensor x, torch::Tensor cu_seqlens, double scale, torch::Tensor y) {
  auto xa = x.accessor<float, 2>();
  auto cu = cu_seqlens.accessor<int64_t, 1>();
  auto ya = y.accessor<float, 2>();
  for (int64_t s = 0; s + 1 < cu.size(0); ++s) {
    for (int64_t j = 0; j < xa.size(1); ++j) {
      double acc = 0.0;
      for (int64_t r = cu[s]; r < cu[s + 1]; ++r) acc += xa[r][j];
      ya[s][j] = static_cast<float>(acc * scale);
    }
  }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("segment_sum", &segment_sum); }
'''

TVM_FFI = '''#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

// FIB's default binding (tvm-ffi), destination-passing, on the CPU.
void segment_sum(tvm::ffi::TensorView x, tvm::ffi::TensorView cu_seqlens, double scale, tvm::ffi::TensorView y) {
  const float* xp = static_cast<const float*>(x.data_ptr());
  const int64_t* cu = static_cast<const int64_t*>(cu_seqlens.data_ptr());
  float* yp = static_cast<float*>(y.data_ptr());
  const int64_t d = x.size(1);
  for (int64_t s = 0; s + 1 < cu_seqlens.size(0); ++s) {
    for (int64_t j = 0; j < d; ++j) {
      double acc = 0.0;
      for (int64_t r = cu[s]; r < cu[s + 1]; ++r) acc += xp[r * d + j];
      yp[s * d + j] = static_cast<float>(acc * scale);
    }
  }
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(segment_sum, segment_sum);
'''

BROKEN = '''// Does not compile: the declaration below is missing its closing parenthesis.
void segment_sum(float* x, int n {
}
'''

CUDA = '''#include <torch/extension.h>
__global__ void noop() {}
void segment_sum(torch::Tensor x, torch::Tensor cu_seqlens, double scale, torch::Tensor y) { noop<<<1, 1>>>(); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("segment_sum", &segment_sum); }
'''


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    definition = {
        "name": DEF, "op_type": OP,
        "description": "Per-segment sums of 8-wide rows, scaled; segments come from cu_seqlens.",
        "axes": {"total_rows": {"type": "var", "description": "rows of x"},
                 "len_cu_seqlens": {"type": "var", "description": "num_seqs + 1"},
                 "num_seqs": {"type": "var", "description": "segments"},
                 "d": {"type": "const", "value": 8, "description": "row width"}},
        "constraints": ["len_cu_seqlens == num_seqs + 1", "total_rows == cu_seqlens[-1].item()"],
        "inputs": {"x": {"shape": ["total_rows", "d"], "dtype": "float32", "description": "rows"},
                   "cu_seqlens": {"shape": ["len_cu_seqlens"], "dtype": "int64", "description": "segment starts"},
                   "scale": {"shape": None, "dtype": "float32", "description": "factor"}},
        "outputs": {"y": {"shape": ["num_seqs", "d"], "dtype": "float32", "description": "scaled sums"}},
        "reference": REFERENCE,
    }
    (ROOT / "definitions" / OP).mkdir(parents=True)
    (ROOT / "definitions" / OP / f"{DEF}.json").write_text(json.dumps(definition, indent=2))
    lines = []
    for uuid, lengths, scale in (("w3", [5, 0, 9], 0.5), ("w2", [16, 7], 2.0)):
        cu = torch.zeros(len(lengths) + 1, dtype=torch.int64)
        cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
        rel = f"blob/workloads/{OP}/{DEF}/{DEF}_{uuid}.safetensors"
        (ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
        save_file({"cu_seqlens": cu}, str(ROOT / rel))
        workload = {"uuid": uuid, "axes": {"total_rows": int(cu[-1]), "len_cu_seqlens": len(lengths) + 1,
                                           "num_seqs": len(lengths)},
                    "inputs": {"x": {"type": "random"},
                               "cu_seqlens": {"type": "safetensors", "path": rel, "tensor_key": "cu_seqlens"},
                               "scale": {"type": "scalar", "value": scale}}}
        lines.append(json.dumps({"definition": DEF, "workload": workload, "solution": None, "evaluation": None}))
    (ROOT / "workloads" / OP).mkdir(parents=True)
    (ROOT / "workloads" / OP / f"{DEF}.jsonl").write_text("\n".join(lines) + "\n")

    def solution(name: str, language: str, entry: str, sources: dict[str, str], **spec) -> None:
        body = {"name": name, "definition": DEF, "author": "alice", "description": name,
                "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": entry, **spec},
                "sources": [{"path": p, "content": c} for p, c in sources.items()]}
        folder = ROOT / "solutions" / "alice" / OP / DEF
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(body, indent=2))

    solution("segsum_dps", "python", "main.py::run", {"main.py": DPS})
    solution("segsum_returning", "python", "main.py::run", {"main.py": RETURNING}, destination_passing_style=False)
    solution("segsum_wrong", "python", "main.py::run", {"main.py": WRONG})
    solution("segsum_cpp", "cpp", "kernel.cpp::segment_sum", {"kernel.cpp": CPP}, binding="torch")
    solution("segsum_tvm_ffi", "cpp", "kernel.cpp::segment_sum", {"kernel.cpp": TVM_FFI})
    solution("segsum_cpp_broken", "cpp", "kernel.cpp::segment_sum", {"kernel.cpp": BROKEN}, binding="torch")
    solution("segsum_cuda", "cuda", "kernel.cu::segment_sum", {"kernel.cu": CUDA}, binding="torch")
    # A short timing plan for the tests; tolerances and the rest stay FIB's defaults.
    (ROOT / "kits").mkdir()
    (ROOT / "kits" / f"{DEF}.json").write_text(json.dumps(
        {"goal": "Sum the segments fast.", "timing": {"warmup": 1, "rounds": 2, "reps_per_round": 2},
         "timeouts": {"startup_s": 240, "workload_s": 30}, "memory_limit_mb": 4096}, indent=2))


if __name__ == "__main__":
    main()
