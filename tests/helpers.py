"""What the test files share: the kernels they run over, what a test needs (a GPU, nvcc), the command line (in this
process, or as a user runs it), a kernel's constants and SASS, and the GPU check of a kernel's output. The fixtures
are in conftest.py."""

import functools
import math
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernels import chapters
from kernels.build import ALL_INSTANCES, compile_nvrtc
from kernels.launch import kernel_constants
from kernels.tools.ablations import ablations, is_variant
from kernels.tools.loop_anatomy import BRANCH, addressed, steady_lines, the_waits, tile_loop_lines
from kernels.tools.sass import disassemble, instance_sass, opcodes
from reference import REFERENCE, SDPA_BACKENDS, attention_error, exact_attention, sdpa, sdpa_available

ROOT = Path(__file__).resolve().parent.parent

# Every kernel the project builds: the ladder's chapters, then the ablation sets' variants (docs/ablations/).
CHAPTERS = chapters()
# A variant a later set borrows is listed once, with the set that holds it.
VARIANTS = list(dict.fromkeys(c for ablation in ablations() for c in ablation.contenders if is_variant(c)))
KERNELS = [*CHAPTERS, *VARIANTS]


def has_gpu() -> bool:
    """Whether torch and CuPy both see a CUDA GPU."""
    if not torch.cuda.is_available():
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU (and CuPy)")
requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def run_cli(*args, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python runner.py ARGS` as a user runs it, from the repository's root; its exit code and output."""
    command = [sys.executable, str(ROOT / "runner.py"), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


@dataclass(frozen=True)
class Ran:
    """A command's exit status and what it printed."""

    code: int
    out: str
    err: str


def run_command(capsys, *argv: object) -> Ran:
    """`python runner.py *argv` in this process (no interpreter to start, torch imported once per session)."""
    from kernels.tools.commands import main

    capsys.readouterr()  # what earlier steps of the test printed is not this command's
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return Ran(code, out, err)


def assert_one_line_error(ran: Ran, code: int, *messages: str) -> None:
    """A mistake or a failure: exit ``code``, one line on stderr naming it, no traceback."""
    assert ran.code == code, ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err
    assert "Traceback" not in ran.err + ran.out
    for message in messages:
        assert message in ran.err, ran.err


def hide_gpu(monkeypatch) -> None:
    """Make torch see no CUDA GPU, as on a machine without one (the GPU machine runs these tests too)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def changed(diff: list[str]) -> list[str]:
    """The lines a unified diff removes or adds, without its two file headers."""
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


# ---------------------------------------------------------------------------------------------------
# A kernel as written and as compiled
# ---------------------------------------------------------------------------------------------------


def source_constant(kernel, name: str) -> int | None:
    """A kernel's ``constexpr int`` as the runtime reads it (``kernel_constants``); None if the kernel has none."""
    return kernel_constants(kernel.source).get(name)


@functools.cache
def sass_text(kernel, instance: str = ALL_INSTANCES[0]) -> str:
    """SASS of a chapter's or variant's instance (by default bf16, not causal) for an sm_90 GPU (sm_90a for the
    Hopper chapters)."""
    return instance_sass(kernel.kernel, instance)


def hopper_sass(kernel, instance: str) -> str:
    """SASS of any instance of a Hopper chapter or variant, decode_attention's included: built for sm_90a with
    every instance its kernel launches."""
    cubin = compile_nvrtc(kernel.source, "sm_90a", kernel.kernel.instances)
    return disassemble(cubin)[cubin.lowered_names[instance]]


def total(counts: Counter, prefix: str) -> int:
    """Instructions of one mnemonic, whatever their modifiers: "HMMA" counts HMMA.16816.F32.BF16."""
    return sum(n for op, n in counts.items() if op == prefix or op.startswith(prefix + "."))


def between_the_waits(kernel, instance: str = ALL_INSTANCES[0]) -> tuple[Counter, Counter]:
    """The opcodes of a Hopper kernel's steady tile path between its wait for S (gsb0, 0x1) and its wait for P V
    (0x0), and after the second."""
    return split_at_the_waits(steady_lines(tile_loop_lines(sass_text(kernel, instance), products=16)))


def split_at_the_waits(steady: list[str]) -> tuple[Counter, Counter]:
    """A steady tile path's opcodes between its two waits, and after the second."""
    first, second = the_waits(steady)
    return opcodes("\n".join(steady[first:second])), opcodes("\n".join(steady[second:]))


def deepest_wait(sass: str) -> int:
    """The largest N of cp.async.wait_group N (SASS: DEPBAR.LE SB0, N): how many copy groups stay in flight."""
    return max(int(n, 16) for n in re.findall(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", sass))


def tile_loop(sass: str) -> Counter:
    """Opcodes of the tile loop: from the target of the longest backward branch to that branch."""
    loops = [(int(target, 16), int(at, 16)) for at, target in BRANCH.findall(sass) if int(target, 16) < int(at, 16)]
    start, end = max(loops, key=lambda loop: loop[1] - loop[0])
    return opcodes("\n".join(line for address, line in addressed(sass) if start <= address <= end))


# ---------------------------------------------------------------------------------------------------
# A kernel's output on the GPU
# ---------------------------------------------------------------------------------------------------

# (batch, seq_len_q, seq_len_k, n_heads, n_kv_heads): 16 query heads on 8, 2 or 1 K/V heads (Qwen3 has 16 on 8),
# and query blocks at the end of longer key sequences, as against a KV cache.
GROUPED = [
    (2, 300, 300, 16, 8),
    (1, 77, 1000, 16, 2),  # ragged lengths: the diagonal crosses tiles at an offset
    (2, 1, 1000, 16, 1),  # one new token against a cache, one K/V head for all (MQA)
    (1, 200, 515, 16, 16),  # several query tiles against a longer key sequence, no grouping
    (2, 77, 300, 12, 4),  # a group of 3: a packed tile of 42 positions leaves two rows empty
    (2, 1, 1000, 40, 8),  # decoding with groups of 5
    (1, 33, 200, 160, 1),  # a group larger than a packed tile: two tiles of heads per position
]


def random_qkv(batch, seq_len, heads, dtype, *, scale=1.0, seed=0, seq_len_k=None, kv_heads=None):
    """q of (batch, seq_len, heads, 128); k and v of seq_len_k rows and kv_heads heads (default: q's)."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    shapes = [(batch, seq_len, heads, 128)] + 2 * [(batch, seq_len_k or seq_len, kv_heads or heads, 128)]
    return [scale * torch.randn(shape, device="cuda", generator=generator).to(dtype) for shape in shapes]


def torch_error(q, k, v, causal, exact):
    """The error torch's own attention makes in the same precision, asked for the same grouped heads and
    bottom-right mask (FA2, else torch's default backend)."""
    backend = SDPA_BACKENDS[REFERENCE]
    if not sdpa_available(backend, q, k, causal=causal):
        backend = None
    return attention_error(sdpa(q, k, v, causal=causal, backend=backend), exact)


def check_chapter(chapter, q, k, v, causal):
    """The kernel writes every output element, no further from the exact attention than torch's own SDPA."""
    exact = exact_attention(q, k, v, causal=causal)
    out = torch.full_like(q, math.nan)  # poisoned: an element the kernel skips stays NaN and fails
    result = chapter.attention(q, k, v, causal=causal, out=out)
    torch.cuda.synchronize()
    assert result.data_ptr() == out.data_ptr()
    assert not out.isnan().any(), "some outputs were not written (or are NaN)"
    error, baseline = attention_error(out, exact), torch_error(q, k, v, causal, exact)
    assert error.within(baseline), f"{chapter.name}: {error} vs torch {baseline}"
