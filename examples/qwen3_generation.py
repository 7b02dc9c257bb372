"""Decoding on a static KV cache: Qwen3-8B's attention, one token at a time after a long prompt, the ladder's op
against torch's SDPA.

python -m examples.qwen3_generation                         # batches 1, 8 and 64; a 4,096-token prompt; 256 tokens
python -m examples.qwen3_generation --batch 8 --tokens 64 --json decode.json

The cache is what a server preallocates: for each of the 36 layers, keys and values for prompt + tokens positions
of every sequence, (batch, max_len, 8, 128) in bf16, written in place, and each sequence's length in one int32
tensor on the GPU. The prompt's keys and values are random, as if prefill had written them. For each new token, in
every layer, its key and value are written at its sequence's length and its 32 query heads attend to the cache:
the op reads the lengths (``seq_lens_k``) and nothing past them. The slots not yet written hold NaN, so an
attention that read one would show it.

What is timed: per token, the attention of all 36 layers, with the write of the token's key and value into each
layer's cache; not the projections, norms, RoPE or MLP (the queries, keys and values are random: their values do
not change the time). The whole decode, tokens × layers, is captured once in a CUDA graph and replayed, as servers
run decoding, so the time is the GPU's and not Python's launches; per token is a replay's time / tokens.

SDPA, fairly: every sequence here has the same length (one prompt length for all), so SDPA gets each layer's cache
sliced to the length so far, exactly the keys the op reads: no mask (torch's FA2 backend takes none) and no
padding read. Sequences of different lengths would need a mask (cuDNN) or one call per sequence.

The check: the outputs of every layer at the first and the last decoded token, against exact float64 attention on
the same cache. The op passes when its error is no more than twice torch's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tabulate import tabulate
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels import Chapter, chapters, select
from kernels.launch import gpu_arch
from kernels.op import chapter_for
from kernels.tools.timing import time_ms
from reference import SDPA_BACKENDS, AttentionError, attention_bytes, attention_error, exact_attention

N_LAYERS, N_HEADS, N_KV_HEADS, HEAD_DIM = 36, 32, 8, 128  # Qwen3-8B
TORCH_BACKENDS = ("torch FA2", "torch cuDNN")
# attention(q, k_cache, v_cache, seq_lens, length): q (batch, 1, 32, 128); the caches (batch, max_len, 8, 128);
# seq_lens each sequence's length (int32, on the GPU), length the same for a batch whose lengths are all equal.
Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


@dataclass
class StaticKVCache:
    """Every layer's keys and values, (layers, batch, max_len, 8, 128), and each sequence's length so far."""

    k: torch.Tensor
    v: torch.Tensor
    seq_lens: torch.Tensor  # int32 (batch,): how many positions of each sequence hold a token

    @classmethod
    def allocate(cls, layers: int, batch: int, max_len: int, device: torch.device | str) -> StaticKVCache:
        """Preallocated once, every slot NaN until written."""
        shape = (layers, batch, max_len, N_KV_HEADS, HEAD_DIM)
        k, v = (torch.full(shape, torch.nan, dtype=torch.bfloat16, device=device) for _ in range(2))
        return cls(k, v, torch.zeros(batch, dtype=torch.int32, device=device))

    def fill_prompt(self, prompt_lens: Sequence[int], generator: torch.Generator) -> None:
        """Random keys and values for each sequence's prompt (what prefill would have written); NaN after them."""
        self.k.fill_(torch.nan)
        self.v.fill_(torch.nan)
        for b, length in enumerate(prompt_lens):
            for cache in (self.k, self.v):
                prompt = torch.randn(cache[:, b, :length].shape, generator=generator, device=cache.device)
                cache[:, b, :length] = prompt.to(cache.dtype)
        self.seq_lens.copy_(torch.tensor(prompt_lens, dtype=torch.int32))

    def clear_after(self, prompt_lens: Sequence[int]) -> None:
        """Forget the decoded tokens: NaN again past each prompt, and the lengths back to the prompts'."""
        for b, length in enumerate(prompt_lens):
            self.k[:, b, length:] = torch.nan
            self.v[:, b, length:] = torch.nan
        self.seq_lens.copy_(torch.tensor(prompt_lens, dtype=torch.int32))

    def next_positions(self) -> torch.Tensor:
        """Count one more token in every sequence; return where it goes: each sequence's old length."""
        positions = self.seq_lens.long()
        self.seq_lens += 1
        return positions

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """One token's key and value per sequence, (batch, 8, 128), into one layer's cache at ``positions``."""
        rows = torch.arange(k.shape[0], device=k.device)
        self.k[layer, rows, positions] = k
        self.v[layer, rows, positions] = v


@dataclass(frozen=True)
class DecodeInputs:
    """Random stand-ins for what each layer's projections give a new token: q (layers, batch, 1, 32, 128), the
    key and value (layers, batch, 8, 128). The same every step: their values change neither time nor the check."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def random(cls, layers: int, batch: int, generator: torch.Generator, device: torch.device | str) -> DecodeInputs:
        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(shape, generator=generator, device=device).to(torch.bfloat16)

        kv_shape = (layers, batch, N_KV_HEADS, HEAD_DIM)
        return cls(randn(layers, batch, 1, N_HEADS, HEAD_DIM), randn(*kv_shape), randn(*kv_shape))


def decode(
    attention: Attention,
    cache: StaticKVCache,
    inputs: DecodeInputs,
    prompt_len: int,
    tokens: int,
    keep: Sequence[int] = (),
) -> dict[int, torch.Tensor]:
    """Decode ``tokens`` tokens after a prompt of ``prompt_len`` in every sequence: per token and layer, write its key
    and value into the cache, then attend. Returns the outputs of the steps in ``keep``, (layers, batch, 1, 32, 128).

    Starts by setting the lengths back to the prompt's, so that a CUDA graph of it can be replayed again and again.
    """
    cache.seq_lens.fill_(prompt_len)
    kept = {}
    for step in range(tokens):
        positions = cache.next_positions()
        outputs = []
        for layer in range(inputs.q.shape[0]):
            cache.write(layer, positions, inputs.k[layer], inputs.v[layer])
            out = attention(inputs.q[layer], cache.k[layer], cache.v[layer], cache.seq_lens, prompt_len + step + 1)
            if step in keep:
                outputs.append(out)
        if step in keep:
            kept[step] = torch.stack(outputs)
    return kept


def ladder_attention(chapter: int | None) -> Attention:
    """The ladder's op on the whole padded cache, each sequence limited to its length by ``seq_lens_k``."""

    def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, seq_lens: Tensor, length: int) -> Tensor:
        return torch.ops.fa_ladder.attention(q, k_cache, v_cache, seq_lens_k=seq_lens, chapter=chapter)

    return attention


def sliced_sdpa(backend: SDPBackend | None) -> Attention:
    """Torch's SDPA on the cache sliced to the tokens so far, the same for every sequence (see the module's doc)."""

    def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, seq_lens: Tensor, length: int) -> Tensor:
        q, k, v = (x.transpose(1, 2) for x in (q, k_cache[:, :length], v_cache[:, :length]))  # (batch, heads, ...)
        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # one query sees every key: no mask
        return out.transpose(1, 2)

    return attention


def exact_outputs(cache: StaticKVCache, inputs: DecodeInputs, prompt_len: int, steps: Sequence[int]) -> torch.Tensor:
    """What ``decode`` keeps at ``steps``, computed with exact attention on the cache as it was at each step."""
    batch = inputs.q.shape[1]
    exact = []
    for step in steps:
        lengths = [prompt_len + step + 1] * batch  # later tokens sit past them: the cache of that step
        for layer in range(inputs.q.shape[0]):
            exact.append(exact_attention(inputs.q[layer], cache.k[layer], cache.v[layer], seq_lens_k=lengths))
    return torch.stack(exact)


def per_token_ms(attention: Attention, cache: StaticKVCache, inputs: DecodeInputs, args: argparse.Namespace) -> float:
    """The decode captured once in a CUDA graph; the median replay's time divided by the tokens decoded."""
    # Warm up on a side stream before capturing, as torch's CUDA graph documentation asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        decode(attention, cache, inputs, args.prompt, args.tokens)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode(attention, cache, inputs, args.prompt, args.tokens)
    replays = time_ms(lambda _: graph.replay(), warmup=1, repeats=args.repeats)
    return statistics.median(replays) / args.tokens


@dataclass(frozen=True)
class Row:
    """One attention at one batch size: time per decoded token (all layers), and the error of its outputs."""

    batch: int
    attention: str
    ms_per_token: float | None  # None: this SDPA backend does not take the inputs
    error: AttentionError | None
    note: str = ""


def checked_steps(args: argparse.Namespace) -> tuple[int, ...]:
    """The decode steps whose outputs are checked: the first token and the last."""
    return tuple(sorted({0, args.tokens - 1}))


def measure(
    name: str,
    attention: Attention,
    cache: StaticKVCache,
    inputs: DecodeInputs,
    args: argparse.Namespace,
    exact: Callable[[], torch.Tensor],
) -> Row:
    """Decode once to check the outputs at the first and last token, then time the decode in a CUDA graph."""
    batch = inputs.q.shape[1]
    cache.clear_after([args.prompt] * batch)  # NaN past the prompt again: the first token's check sees through
    kept = decode(attention, cache, inputs, args.prompt, args.tokens, keep=checked_steps(args))
    error = attention_error(torch.cat(list(kept.values())), exact())
    return Row(batch, name, per_token_ms(attention, cache, inputs, args), error)


def run_batch(batch: int, chapter: Chapter, args: argparse.Namespace) -> list[Row]:
    """Every attention at one batch size, on one cache and one set of inputs."""
    generator = torch.Generator("cuda").manual_seed(batch)
    cache = StaticKVCache.allocate(args.layers, batch, args.prompt + args.tokens, "cuda")
    cache.fill_prompt([args.prompt] * batch, generator)
    inputs = DecodeInputs.random(args.layers, batch, generator, "cuda")

    @functools.cache
    def exact() -> torch.Tensor:
        """Computed after the first decode, once: every decode writes the same tokens into the same cache."""
        return exact_outputs(cache, inputs, args.prompt, checked_steps(args))

    rows = [measure(f"{chapter.name} (op)", ladder_attention(chapter.number), cache, inputs, args, exact)]
    for name in TORCH_BACKENDS:
        try:
            rows.append(measure(name, sliced_sdpa(SDPA_BACKENDS[name]), cache, inputs, args, exact))
        except RuntimeError as error:  # each backend has its own limits; say which and go on
            rows.append(Row(batch, name, None, None, note=str(error).strip().splitlines()[0]))
    return rows


def passes(rows: list[Row]) -> bool:
    """The op's error is within twice the best torch backend's (each row of one batch size)."""
    ours, *torch_rows = rows
    errors = [row.error for row in torch_rows if row.error is not None]
    return not errors or ours.error.within(min(errors, key=lambda error: error.rel_l2))


def print_rows(rows: list[Row], checks: dict[int, bool], args: argparse.Namespace) -> None:
    """One table: per batch size and attention, ms per token, the K/V read rate, the error, the op's check."""
    mean_len = args.prompt + (args.tokens + 1) / 2  # keys per sequence, on average over the decode
    table, notes = [], []
    for row in rows:
        if row.ms_per_token is None:
            table.append([row.batch, row.attention, "n/a", "", "", ""])
            notes.append(f"{row.attention} at batch {row.batch}: {row.note}")
            continue
        moved = args.layers * attention_bytes(
            row.batch, 1, N_HEADS, HEAD_DIM, seq_len_k=round(mean_len), n_kv_heads=N_KV_HEADS, element_bytes=2
        )
        check = ("pass" if checks[row.batch] else "FAIL") if row.attention.endswith("(op)") else ""
        tb_per_s = moved / (row.ms_per_token * 1e-3) / 1e12
        table.append(
            [row.batch, row.attention, f"{row.ms_per_token:.3f}", f"{tb_per_s:.2f}", f"{row.error.rel_l2:.1e}", check]
        )
    headers = ["batch", "attention", "ms / token", "TB/s", "err", "check"]
    print(tabulate(table, headers=headers, disable_numparse=True, colalign=["right", "left"] + ["right"] * 4))
    print(
        f"ms / token: the attention of all {args.layers} layers with the write of the token's key and value, "
        "replayed from a CUDA graph; TB/s: the K and V each layer reads (and q, out) over that time; err: relative "
        "L2 distance from exact float64 attention at the first and last token"
    )
    for note in notes:
        print(f"n/a: {note}")


def parse_batches(text: str) -> list[int]:
    """--batch: one batch size or several, comma-separated."""
    try:
        batches = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes are integers separated by commas, got {text!r}") from None
    if min(batches) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be at least 1, got {text!r}")
    return batches


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.qwen3_generation",
        description="Decoding on a static KV cache: Qwen3-8B's attention with the ladder's op against torch's SDPA.",
    )
    parser.add_argument("--batch", type=parse_batches, default=[1, 8, 64], help="batch sizes (default 1,8,64)")
    parser.add_argument("--prompt", type=int, default=4096, help="tokens of every prompt (default 4096)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens decoded after it (default 256)")
    parser.add_argument("--layers", type=int, default=N_LAYERS, help=f"layers (default {N_LAYERS}, Qwen3-8B)")
    parser.add_argument("--chapter", type=int, help="the chapter the op runs (default: the fastest for this GPU)")
    parser.add_argument("--repeats", type=int, default=5, help="timed replays; the median is shown (default 5)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results to this file")
    args = parser.parse_args(argv)
    if min(args.prompt, args.tokens, args.layers, args.repeats) < 1:
        parser.error("--prompt, --tokens, --layers and --repeats must be at least 1")
    if args.chapter is not None:
        try:
            select(chapters(), str(args.chapter))
        except ValueError as error:
            parser.error(f"--chapter: {error}")
    return args


def cache_bytes(batch: int, args: argparse.Namespace) -> int:
    """The keys and values of every layer, bf16."""
    return 2 * args.layers * batch * (args.prompt + args.tokens) * N_KV_HEADS * HEAD_DIM * 2


def write_json(path: Path, rows: list[Row], checks: dict[int, bool], chapter: Chapter, args, argv) -> None:
    from kernels.tools.ladder import environment
    from kernels.tools.sources import source_hashes

    measured = {"sources": source_hashes([chapter.source])}  # the op's kernel, as results/ files record theirs
    record = {
        "environment": environment("python -m examples.qwen3_generation " + " ".join(argv)) | measured,
        "model": {"layers": args.layers, "n_heads": N_HEADS, "n_kv_heads": N_KV_HEADS, "head_dim": HEAD_DIM},
        "prompt": args.prompt,
        "tokens": args.tokens,
        "chapter": chapter.name,
        "timed": "per token: all layers' attention and cache write, replayed from a CUDA graph (median replay)",
        "rows": [
            {**asdict(row), "check": checks.get(row.batch) if row.attention.endswith("(op)") else None} for row in rows
        ],
    }
    path.write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("No CUDA GPU found: the example runs the kernels on an NVIDIA GPU (sm_80 or newer).", file=sys.stderr)
        return 1
    try:
        chapter = chapter_for(0, args.chapter, kv_cache=True)
        chapter.kernel.build_arch(gpu_arch(0))
    except ValueError as error:  # no chapter with KV lengths here, or one written for another GPU
        print(error, file=sys.stderr)
        return 1
    print(
        f"Qwen3-8B attention ({args.layers} layers, {N_HEADS} query and {N_KV_HEADS} key/value heads of {HEAD_DIM}), "
        f"decoding {args.tokens} tokens after a {args.prompt}-token prompt, bf16, on {torch.cuda.get_device_name(0)}"
    )
    rows: list[Row] = []
    checks: dict[int, bool] = {}
    for batch in args.batch:
        free, _ = torch.cuda.mem_get_info()
        if cache_bytes(batch, args) > 0.8 * free:
            print(
                f"batch {batch} left out: its cache takes {cache_bytes(batch, args) / 2**30:.1f} GiB, "
                f"{free / 2**30:.1f} GiB are free",
                file=sys.stderr,
            )
            continue
        with torch.no_grad():
            batch_rows = run_batch(batch, chapter, args)
        torch.cuda.empty_cache()  # the next batch size allocates its own cache
        checks[batch] = passes(batch_rows)
        rows += batch_rows
    if not rows:
        print("no batch size fits in this GPU's memory", file=sys.stderr)
        return 1
    print_rows(rows, checks, args)
    if args.json:
        write_json(args.json, rows, checks, chapter, args, argv)
        print(f"wrote {args.json}")
    if not all(checks.values()):
        print("error check failed: the op is more than twice torch's error", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
