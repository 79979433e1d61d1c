"""Input generator for the GDN prefill kit.

Workload axes: num_seqs and seq_len; each sequence's length is drawn from [seq_len/2, seq_len].
q and k are L2-normalised per head (as the model does before the kernel), so the recurrence stays
bounded; the decay parameters are in the range a trained model has."""
import torch
import torch.nn.functional as F


def make_inputs(axes, seed, device):
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    n, max_len = int(axes["num_seqs"]), int(axes["seq_len"])
    lengths = torch.randint(max(1, max_len // 2), max_len + 1, (n,), generator=g)
    cu = torch.zeros(n + 1, dtype=torch.int64)
    cu[1:] = torch.cumsum(lengths, 0)
    total = int(cu[-1])

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    q = F.normalize(randn(total, 4, 128), dim=-1)
    k = F.normalize(randn(total, 4, 128), dim=-1)
    return {
        "q": q.to(torch.bfloat16).to(device),
        "k": k.to(torch.bfloat16).to(device),
        "v": randn(total, 8, 128).to(torch.bfloat16).to(device),
        "state": (0.1 * randn(n, 8, 128, 128)).to(device),
        "A_log": torch.log(torch.rand(8, generator=g) * 15 + 1).to(device),
        "a": randn(total, 8).to(torch.bfloat16).to(device),
        "dt_bias": (0.5 * randn(8)).to(device),
        "b": randn(total, 8).to(torch.bfloat16).to(device),
        "cu_seqlens": cu.to(device),
        "scale": 0.0,
    }
