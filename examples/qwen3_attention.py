"""A Qwen3 attention layer, written out, whose attention is the ladder's op: prefill, and chunked prefill on a KV cache.

python -m examples.qwen3_attention                      # batch 4 × 4096 tokens, the fastest chapter for this GPU
python -m examples.qwen3_attention --batch 1 --chapter 8

The layer has Qwen3-0.6B's shape (hidden size 1024; 16 query heads and 8 key/value heads of 128) and random
weights, in bf16. It runs twice: on all tokens at once (prefill), and on the same tokens in chunks, each chunk's
queries attending to the KV cache of every token so far (chunked prefill: fewer queries than keys, the causal mask
aligned bottom-right). Each run goes through the ladder's op and through torch's SDPA backends; every output is
compared with the layer computed with exact float64 attention, and each is timed.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tabulate import tabulate
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from kernels import Chapter, chapters, select
from kernels.launch import gpu_arch
from kernels.op import chapter_for
from kernels.tools.timing import time_ms
from reference import SDPA_BACKENDS, AttentionError, attention_error, exact_attention

HIDDEN, N_HEADS, N_KV_HEADS, HEAD_DIM = 1024, 16, 8, 128  # Qwen3-0.6B
ROPE_THETA, RMS_EPS = 1_000_000.0, 1e-6
# attention(q, k, v, *, causal): q (batch, seq_q, 16, 128), k and v (batch, seq_k, 8, 128) -> like q.
Attention = Callable[..., torch.Tensor]
PHASES = ("prefill", "chunked")
Run = Callable[[Attention], torch.Tensor]  # the layer on the input, with one attention


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, Qwen3's rotate-half form: element i of a head pairs with element i + 64."""
    inv_freq = ROPE_THETA ** (-torch.arange(0, HEAD_DIM, 2, device=x.device, dtype=torch.float32) / HEAD_DIM)
    angles = positions[:, None].float() * inv_freq  # (seq, 64): token position × the pair's frequency
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]  # broadcast over the heads
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


@dataclass
class KVCache:
    """The keys and values of every token so far, (batch, seq_k, 8, 128), grown by one chunk at a time."""

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[1]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add a chunk's keys and values; return all of them (contiguous, as the kernels read them best)."""
        self.k = k if self.k is None else torch.cat((self.k, k), dim=1)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=1)
        return self.k, self.v


class Qwen3Attention(nn.Module):
    """Qwen3's attention block: project, RMSNorm each q and k head, rotate (RoPE), attend causally, project back."""

    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, N_HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, N_KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, N_KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(N_HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.q_norm = nn.RMSNorm(HEAD_DIM, eps=RMS_EPS)  # over each head's 128 values, not the hidden size
        self.k_norm = nn.RMSNorm(HEAD_DIM, eps=RMS_EPS)

    def forward(self, x: torch.Tensor, attention: Attention, cache: KVCache | None = None) -> torch.Tensor:
        """(batch, seq, 1024) -> (batch, seq, 1024); with a cache, x is the next chunk and attends to all before it."""
        batch, seq_len, _ = x.shape
        start = cache.length if cache is not None else 0
        positions = torch.arange(start, start + seq_len, device=x.device)
        q = rope(self.q_norm(self.q_proj(x).view(batch, seq_len, N_HEADS, HEAD_DIM)), positions)
        k = rope(self.k_norm(self.k_proj(x).view(batch, seq_len, N_KV_HEADS, HEAD_DIM)), positions)
        v = self.v_proj(x).view(batch, seq_len, N_KV_HEADS, HEAD_DIM)
        if cache is not None:
            k, v = cache.append(k, v)
        out = attention(q, k, v, causal=True)
        # In the attention's precision: the exact reference's float32 output keeps float32 to the end.
        return F.linear(out.flatten(2), self.o_proj.weight.to(out.dtype))


def prefill(layer: Qwen3Attention, x: torch.Tensor, attention: Attention) -> torch.Tensor:
    """The layer on every token at once."""
    return layer(x, attention)


def chunked_prefill(layer: Qwen3Attention, x: torch.Tensor, attention: Attention, chunks: int) -> torch.Tensor:
    """The layer on ``chunks`` consecutive pieces of x, each attending to the KV cache of all tokens before it."""
    cache = KVCache()
    return torch.cat([layer(piece, attention, cache) for piece in x.chunk(chunks, dim=1)], dim=1)


def torch_attention(backend: SDPBackend | None) -> Attention:
    """Torch's SDPA on one backend (None: torch's own choice), with the chapters' layout and causal alignment."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> torch.Tensor:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # SDPA wants (batch, heads, seq, 128)
        # is_causal aligns the mask top-left; a chunk of queries after the cached keys needs it bottom-right.
        mask = causal_lower_right(q.shape[2], k.shape[2]) if causal and q.shape[2] != k.shape[2] else None
        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal and mask is None, enable_gqa=True
            )
        return out.transpose(1, 2)

    return attention


def ladder_attention(chapter: int | None) -> Attention:
    """The ladder's op: chapter ``chapter``, or the fastest one for the GPU."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> torch.Tensor:
        return torch.ops.fa_ladder.attention(q, k, v, causal=causal, chapter=chapter)

    return attention


@dataclass(frozen=True)
class Measurement:
    """One run of the layer with one attention: its median time and its output's error."""

    ms: float
    error: AttentionError


def measure(run: Run, attention: Attention, exact: torch.Tensor, args: argparse.Namespace) -> Measurement:
    """The error of ``run(attention)`` against ``exact``, and its median time (CUDA events, after warm-up)."""
    error = attention_error(run(attention), exact)
    return Measurement(statistics.median(time_ms(lambda _: run(attention), args.warmup, args.repeats)), error)


def measure_torch(run: Run, attention: Attention, exact: torch.Tensor, args: argparse.Namespace) -> Measurement | None:
    """As ``measure``, or None where this SDPA backend does not take the inputs (each has its own limits)."""
    try:
        return measure(run, attention, exact, args)
    except RuntimeError:
        return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.qwen3_attention",
        description="A Qwen3 attention layer with the ladder's op, against torch's SDPA: error and time.",
    )
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=4096, help="tokens per sequence (default 4096)")
    parser.add_argument("--chunks", type=int, default=4, help="chunks of the chunked prefill (default 4)")
    parser.add_argument("--chapter", type=int, help="the chapter the op runs (default: the fastest for this GPU)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs; the median is shown (default 20)")
    args = parser.parse_args(argv)
    if min(args.batch, args.seq_len, args.chunks, args.repeats) < 1 or args.warmup < 0:
        parser.error("--batch, --seq-len, --chunks and --repeats must be at least 1, --warmup at least 0")
    if args.seq_len % args.chunks:
        parser.error(f"--seq-len {args.seq_len} does not split into {args.chunks} equal chunks")
    if args.chapter is not None:
        try:
            select(chapters(), str(args.chapter))
        except ValueError as error:
            parser.error(f"--chapter: {error}")
    return args


def print_results(rows: dict[str, dict[str, Measurement | None]], ok: bool, ours: str, title: str) -> None:
    """The comparison as a small table: per run, time and relative L2 error; the check on the ladder's row."""
    headers = ["attention"] + [f"{phase} {what}" for phase in PHASES for what in ("ms", "err")] + ["check"]
    table = []
    for name, measured in rows.items():
        cells = [name]
        for phase in PHASES:
            m = measured[phase]
            cells += ["n/a", "n/a"] if m is None else [f"{m.ms:.3f}", f"{m.error.rel_l2:.1e}"]
        table.append(cells + [("pass" if ok else "FAIL") if name == ours else ""])
    print(title)
    print(tabulate(table, headers=headers, disable_numparse=True, colalign=["left"] + ["right"] * (len(headers) - 1)))
    print("err: relative L2 distance of the layer's output from the same layer with exact float64 attention")


def run_comparison(args: argparse.Namespace, chapter: Chapter) -> int:
    """Build the layer and its input, measure every attention in both runs, print the table, check the ladder's."""
    torch.manual_seed(0)
    layer = Qwen3Attention().to("cuda", torch.bfloat16)
    x = torch.randn(args.batch, args.seq_len, HIDDEN, device="cuda", dtype=torch.bfloat16)
    runs: dict[str, Run] = {
        "prefill": lambda attention: prefill(layer, x, attention),
        "chunked": lambda attention: chunked_prefill(layer, x, attention, args.chunks),
    }
    # Chunked prefill computes the same outputs as prefill: one exact reference serves both.
    exact = prefill(layer, x, exact_attention)
    rows = {}
    for name, backend in SDPA_BACKENDS.items():
        rows[name] = {phase: measure_torch(run, torch_attention(backend), exact, args) for phase, run in runs.items()}
    ours = f"{chapter.name} (op)"
    rows[ours] = {phase: measure(run, ladder_attention(chapter.number), exact, args) for phase, run in runs.items()}
    ok = True
    for phase in PHASES:
        torch_errors = [measured[phase].error for name, measured in rows.items() if name != ours and measured[phase]]
        ok &= rows[ours][phase].error.within(min(torch_errors, key=lambda error: error.rel_l2))
    title = (
        f"Qwen3 attention layer, batch {args.batch} × {args.seq_len} tokens (chunked: {args.chunks} × "
        f"{args.seq_len // args.chunks}), bf16, on {torch.cuda.get_device_name(0)}"
    )
    print_results(rows, ok, ours, title)
    if not ok:
        print(f"error check failed: {ours} is more than twice torch's error", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        print("No CUDA GPU found: the example runs the kernels on an NVIDIA GPU (sm_80 or newer).", file=sys.stderr)
        return 1
    chapter = chapter_for(0, args.chapter)
    try:
        chapter.kernel.build_arch(gpu_arch(0))
    except ValueError as error:  # a chapter written for another GPU (wgmma: Hopper only)
        print(error, file=sys.stderr)
        return 1
    with torch.no_grad():
        return run_comparison(args, chapter)


if __name__ == "__main__":
    sys.exit(main())
