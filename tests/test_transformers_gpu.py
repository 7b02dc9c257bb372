"""A real client: Hugging Face transformers' Qwen3, with the ladder's op as its attention, gives SDPA's logits.

A two-layer Qwen3 with random weights (Qwen3-0.6B's attention shape: 16 query heads, 8 key/value heads of 128)
runs a prompt and then decodes token by token on its KV cache, three times over: in float32 with SDPA (the truth),
in bf16 with SDPA, and in bf16 with the ladder. At every step the ladder's logits must be no further from the truth
than twice SDPA's in the same precision.
"""

import copy

import pytest
import torch

from kernels.op import register_with_transformers
from reference import attention_error
from tests.helpers import requires_gpu

transformers = pytest.importorskip("transformers")
pytestmark = requires_gpu

PROMPT_TOKENS, NEW_TOKENS, VOCAB = 77, 6, 1000


def random_qwen3() -> torch.nn.Module:
    """Two layers of Qwen3 with random weights, in float32 on the GPU, attention through torch's SDPA."""
    config = transformers.Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
    )
    torch.manual_seed(0)
    return transformers.Qwen3ForCausalLM._from_config(config, attn_implementation="sdpa").to("cuda").eval()


def with_attention(model: torch.nn.Module, dtype: torch.dtype, attn_implementation: str) -> torch.nn.Module:
    """A copy of the model in another precision, with another attention function."""
    model = copy.deepcopy(model).to(dtype)
    model.set_attn_implementation(attn_implementation)
    return model


def step_logits(model: torch.nn.Module, prompt: torch.Tensor, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The next-token logits after the prompt, then after each of ``tokens`` fed one at a time on the KV cache."""
    cache = transformers.DynamicCache(config=model.config)
    logits = [model(prompt, past_key_values=cache, use_cache=True).logits[:, -1]]
    for token in tokens.unbind(1):
        logits.append(model(token[:, None], past_key_values=cache, use_cache=True).logits[:, -1])
    return logits


def greedy_tokens(model: torch.nn.Module, prompt: torch.Tensor) -> torch.Tensor:
    """The tokens the model picks greedily after the prompt: every model is then fed these same tokens."""
    out = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False)
    return out[:, prompt.shape[1] :]


@torch.no_grad()
def test_logits_match_sdpa_for_a_prompt_and_cached_decoding():
    truth_model = random_qwen3()
    generator = torch.Generator("cuda").manual_seed(0)
    prompt = torch.randint(0, VOCAB, (2, PROMPT_TOKENS), device="cuda", generator=generator)
    tokens = greedy_tokens(truth_model, prompt)
    truth = step_logits(truth_model, prompt, tokens)
    sdpa = step_logits(with_attention(truth_model, torch.bfloat16, "sdpa"), prompt, tokens)
    ladder = step_logits(with_attention(truth_model, torch.bfloat16, register_with_transformers()), prompt, tokens)
    for step, (exact, baseline, ours) in enumerate(zip(truth, sdpa, ladder, strict=True)):
        error, torch_error = attention_error(ours, exact.float()), attention_error(baseline, exact.float())
        assert error.within(torch_error), f"step {step}: ladder {error}, SDPA in bf16 {torch_error}"


# A small Qwen3 (2 layers, hidden size 256, 4 query heads and 2 key/value heads of 128) whose random weights and
# prompt leave every greedy choice of the 16 below at least MARGIN ahead of the runner-up in float32.
GENERATE_SEED, GENERATE_VOCAB, GENERATE_TOKENS, MARGIN = 33, 64, 16, 0.02


def small_qwen3() -> torch.nn.Module:
    config = transformers.Qwen3Config(
        vocab_size=GENERATE_VOCAB,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=128,
    )
    torch.manual_seed(GENERATE_SEED)
    return transformers.Qwen3ForCausalLM._from_config(config, attn_implementation="sdpa").to("cuda").eval()


@torch.no_grad()
def test_greedy_generate_picks_sdpas_tokens():
    """transformers' generate() with the ladder as the attention (the prompt, then each new token on the KV cache)
    picks the same tokens as with SDPA. In fp16, whose rounding moves these logits by about a tenth of MARGIN: a
    token that differs is an attention that differs, not rounding."""
    model = small_qwen3()
    generator = torch.Generator().manual_seed(GENERATE_SEED)
    prompt = torch.randint(0, GENERATE_VOCAB, (2, 24), generator=generator).to("cuda")  # two sequences, no padding
    options = {"max_new_tokens": GENERATE_TOKENS, "do_sample": False}
    truth = model.generate(prompt, **options, output_scores=True, return_dict_in_generate=True)
    best, runner_up = torch.stack(truth.scores).topk(2, dim=-1).values.unbind(-1)
    assert (best - runner_up).min() > MARGIN, "the model's greedy choices are no longer clear: pick another seed"
    sdpa = with_attention(model, torch.float16, "sdpa").generate(prompt, **options)
    ladder = with_attention(model, torch.float16, register_with_transformers()).generate(prompt, **options)
    assert ladder.shape == (2, 24 + GENERATE_TOKENS)
    assert torch.equal(ladder, sdpa), f"ladder {ladder[:, 24:].tolist()}, SDPA {sdpa[:, 24:].tolist()}"
    assert torch.equal(sdpa, truth.sequences)
