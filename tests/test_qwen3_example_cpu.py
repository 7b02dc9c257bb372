"""The Qwen3 example without a GPU: its layer is transformers' Qwen3 attention, chunked prefill computes what prefill
does, and its command line fails cleanly."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from examples.qwen3_attention import HIDDEN, Qwen3Attention, chunked_prefill, main, prefill, torch_attention

ROOT = Path(__file__).resolve().parent.parent
CPU_ATTENTION = torch_attention(None)  # torch's SDPA, which runs on the CPU too


def random_layer(seed: int = 0) -> Qwen3Attention:
    """The layer in float32 with random weights, the norms' included (they start at one)."""
    torch.manual_seed(seed)
    layer = Qwen3Attention()
    for norm in (layer.q_norm, layer.k_norm):
        torch.nn.init.normal_(norm.weight, mean=1.0, std=0.2)
    return layer


def test_layer_matches_transformers_qwen3_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3 import modeling_qwen3

    config = transformers.Qwen3Config(
        hidden_size=HIDDEN,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    )
    config._attn_implementation = "sdpa"
    layer = random_layer()
    theirs = modeling_qwen3.Qwen3Attention(config, layer_idx=0)
    theirs.load_state_dict(layer.state_dict())  # the same parameter names, one for one
    x = torch.randn(2, 48, HIDDEN)
    position_embeddings = modeling_qwen3.Qwen3RotaryEmbedding(config)(x, torch.arange(48)[None])
    with torch.no_grad():
        expected, _ = theirs(x, position_embeddings, attention_mask=None)
        torch.testing.assert_close(prefill(layer, x, CPU_ATTENTION), expected, rtol=1e-4, atol=1e-5)


def test_chunked_prefill_computes_prefill():
    """Each chunk's queries see every cached key before them: the causal mask aligned bottom-right."""
    layer = random_layer(seed=1)
    x = torch.randn(2, 64, HIDDEN)
    with torch.no_grad():
        whole = prefill(layer, x, CPU_ATTENTION)
        torch.testing.assert_close(chunked_prefill(layer, x, CPU_ATTENTION, chunks=4), whole, rtol=1e-4, atol=1e-5)


def test_without_a_gpu_says_so_and_fails():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "examples.qwen3_attention", "--batch", "1"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 1
    assert "No CUDA GPU found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chunks", "3"], "does not split into 3 equal chunks"),
        (["--chapter", "99"], "no chapter '99'"),
        (["--batch", "0"], "at least 1"),
    ],
)
def test_bad_options_get_one_clear_line(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
