"""Run chapters at a ragged, causal shape (and a full one) for compute-sanitizer's memcheck and racecheck.

compute-sanitizer --tool racecheck python scripts/sanitize.py 5 7
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernels import chapters, select  # noqa: E402

q, k, v = (torch.randn(2, 333, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for chapter in select(chapters(), ",".join(sys.argv[1:])):
    chapter.attention(q, k, v, causal=True)
    chapter.attention(q, k, v)
    torch.cuda.synchronize()
    print(f"ran {chapter.name} on {tuple(q.shape)}, causal and full")
