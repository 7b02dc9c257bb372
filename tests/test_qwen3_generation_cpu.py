"""The generation example without a GPU: its static cache writes each token at its sequence's length, its decode
gives every step the cache of that step, and its command line fails cleanly."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from examples.qwen3_generation import (
    N_HEADS,
    DecodeInputs,
    StaticKVCache,
    decode,
    exact_outputs,
    main,
    sliced_sdpa,
)
from reference import exact_attention

ROOT = Path(__file__).resolve().parent.parent
LAYERS, BATCH, PROMPT, TOKENS = 2, 3, 6, 4


def small_cache(prompt_lens: list[int], max_len: int = PROMPT + TOKENS) -> StaticKVCache:
    cache = StaticKVCache.allocate(LAYERS, len(prompt_lens), max_len, "cpu")
    cache.fill_prompt(prompt_lens, torch.Generator().manual_seed(0))
    return cache


def exact_with_lengths(q, k_cache, v_cache, seq_lens, length):
    """Exact attention that reads the lengths as the op does, and ignores the slice length SDPA is given."""
    return exact_attention(q, k_cache, v_cache, seq_lens_k=seq_lens).to(q.dtype)


def test_a_token_goes_at_its_own_sequences_length():
    cache = small_cache([3, 5, 0])
    k, v = (torch.randn(3, 8, 128).to(torch.bfloat16) for _ in range(2))
    positions = cache.next_positions()
    cache.write(1, positions, k, v)
    assert positions.tolist() == [3, 5, 0] and cache.seq_lens.tolist() == [4, 6, 1]
    assert cache.seq_lens.dtype == torch.int32
    for b, position in enumerate([3, 5, 0]):
        assert torch.equal(cache.k[1, b, position], k[b]) and torch.equal(cache.v[1, b, position], v[b])
        assert cache.k[1, b, position + 1 :].isnan().all()  # past the new length: still never written
        assert cache.k[0, b, position].isnan().all()  # the other layer: its own write, not this one
        assert not cache.k[:, b, :position].isnan().any()  # the prompt


def test_clear_after_forgets_the_decoded_tokens():
    cache = small_cache([PROMPT] * BATCH)
    prompt = cache.k[:, :, :PROMPT].clone()
    inputs = DecodeInputs.random(LAYERS, BATCH, torch.Generator().manual_seed(1), "cpu")
    decode(exact_with_lengths, cache, inputs, PROMPT, TOKENS)
    assert cache.seq_lens.tolist() == [PROMPT + TOKENS] * BATCH and not cache.k.isnan().any()
    cache.clear_after([PROMPT] * BATCH)
    assert cache.seq_lens.tolist() == [PROMPT] * BATCH
    assert torch.equal(cache.k[:, :, :PROMPT], prompt) and cache.k[:, :, PROMPT:].isnan().all()


@pytest.mark.parametrize(
    "attention", [exact_with_lengths, sliced_sdpa(None)], ids=["lengths-as-the-op-reads-them", "sliced-sdpa"]
)
def test_each_step_attends_to_the_cache_of_that_step(attention):
    """Step s sees the prompt and tokens 0 … s, none after (the cache past them is NaN when it runs): what exact
    attention on the final cache limited to prompt + s + 1 keys gives. Decoding twice gives the same, as a replayed
    CUDA graph must."""
    cache = small_cache([PROMPT] * BATCH)
    inputs = DecodeInputs.random(LAYERS, BATCH, torch.Generator().manual_seed(2), "cpu")
    steps = tuple(range(TOKENS))
    kept = decode(attention, cache, inputs, PROMPT, TOKENS, keep=steps)
    assert sorted(kept) == list(steps) and kept[0].shape == (LAYERS, BATCH, 1, N_HEADS, 128)
    exact = exact_outputs(cache, inputs, PROMPT, steps)
    outputs = torch.stack([kept[step] for step in steps]).flatten(0, 1).float()
    assert not outputs.isnan().any()
    torch.testing.assert_close(outputs, exact, rtol=2e-2, atol=2e-2)  # bf16 outputs
    again = decode(attention, cache, inputs, PROMPT, TOKENS, keep=steps)
    assert all(torch.equal(again[step], kept[step]) for step in steps)


def test_the_check_would_see_an_attention_reading_past_the_length():
    """An attention that reads one slot too many reads a slot never written yet: NaN at the first token."""
    cache = small_cache([PROMPT] * BATCH)
    inputs = DecodeInputs.random(LAYERS, BATCH, torch.Generator().manual_seed(3), "cpu")
    sdpa = sliced_sdpa(None)

    def one_too_many(q, k_cache, v_cache, seq_lens, length):
        return sdpa(q, k_cache, v_cache, seq_lens, length + 1)

    kept = decode(one_too_many, cache, inputs, PROMPT, TOKENS, keep=(0,))
    assert kept[0].isnan().all() and math.isnan(kept[0].float().sum().item())


def test_without_a_gpu_says_so_and_fails():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "examples.qwen3_generation", "--batch", "1", "--tokens", "4"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 1
    assert "No CUDA GPU found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch", "0"], "batch sizes must be at least 1"),
        (["--batch", "1,x"], "batch sizes are integers separated by commas, got '1,x'"),
        (["--tokens", "0"], "must be at least 1"),
        (["--chapter", "99"], "no chapter '99'"),
    ],
)
def test_bad_options_get_one_clear_line(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
