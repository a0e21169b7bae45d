"""LoRA checkpoints on the real 135M model: a PEFT adapter built on the GGUF-loaded HF model runs in
the transformers client (as is and merged into a folder) and in llama.cpp (converted to a llama.cpp
adapter GGUF), and the two engines see the same change of the logits."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from kate.llm.registry import SMALL_TEST_MODEL, sha256_of

pytestmark = pytest.mark.model

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PROMPTS = [[{"role": "user", "content": text}] for text in
           ("Say hello to Ada in one short sentence.", "What is 12 times 7?", "Name a color of the sky.")]  # fmt: skip
# lora_B ~ N(0, 0.2): a shift of the logits well above the Q4 noise between the engines (at 0.02 the
# deltas of llama.cpp and HF correlated only ~0.7-0.8; at 0.2, 0.99 with a slope of ~1.0)
B_STD = 0.2


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, small_hf) -> Path:
    """A seeded random LoRA (r=8, alpha=16, every linear layer), saved with its tokenizer the way
    TRL saves a checkpoint, naming the kate model as its base."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    peft_model = get_peft_model(copy.deepcopy(small_hf.model), config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * B_STD)
    peft_model.peft_config["default"].base_model_name_or_path = SMALL_TEST_MODEL
    folder = tmp_path_factory.mktemp("lora") / "adapter"
    peft_model.save_pretrained(folder)
    small_hf.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hf_lora(adapter_dir):
    from kate.llm.hf import HFChatModel

    return HFChatModel(str(adapter_dir), device="cpu")


def _llama_logits(model, messages) -> np.ndarray:
    """Next-token logits of a fresh llama.cpp client (its own context; the cells are removed after)."""
    tokens = model.tokenize(model.render(messages))
    model.decode_batch([(t, i, [0], i == len(tokens) - 1) for i, t in enumerate(tokens)])
    logits = model.logits_at(len(tokens) - 1)
    model.seq_rm(0, 0, -1)
    return logits


def test_hf_applies_the_adapter_over_the_named_base(small_hf, hf_lora, adapter_dir):
    for messages in PROMPTS:
        base = small_hf.next_token_logits(messages)
        adapted = hf_lora.next_token_logits(messages)
        assert (adapted - base).abs().max() > 1.0
        with hf_lora.model.disable_adapter():
            assert torch.allclose(hf_lora.next_token_logits(messages), base, atol=1e-4)
    runtime = hf_lora.runtime()
    assert runtime["lora"] == str(adapter_dir.resolve()) and len(runtime["lora_sha256"]) == 64
    assert runtime["lora_base"] == SMALL_TEST_MODEL and "+lora-" in hf_lora.name
    [completion] = hf_lora.chat(PROMPTS[0], max_tokens=4)
    assert completion.usage.completion_tokens <= 4
    assert len(hf_lora.forward(PROMPTS[0]).hidden_states) == hf_lora.model.config.num_hidden_layers + 1


def test_merged_folder_loads_and_matches_the_adapter(hf_lora, adapter_dir, tmp_path):
    from kate.llm.hf import HFChatModel
    from kate.llm.lora import MERGE_MARKER, merge_adapter

    folder = merge_adapter(adapter_dir, tmp_path / "merged", dtype="float32")
    assert folder == (tmp_path / "merged").resolve()
    marker = json.loads((folder / MERGE_MARKER).read_text())
    assert marker["adapter"] == str(adapter_dir.resolve()) and marker["base"] == SMALL_TEST_MODEL
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left
    merged = HFChatModel(str(folder), device="cpu")
    assert merged.lora is None
    for messages in PROMPTS:
        assert torch.allclose(merged.next_token_logits(messages), hf_lora.next_token_logits(messages), atol=2e-3)
    assert merged.chat(PROMPTS[0], max_tokens=8)[0].text == hf_lora.chat(PROMPTS[0], max_tokens=8)[0].text


def test_gguf_adapter_has_llama_cpp_names_shapes_and_alpha(adapter_dir, tmp_path):
    import gguf

    from kate.llm.lora import adapter_to_gguf

    path = adapter_to_gguf(adapter_dir, tmp_path / "a.gguf")
    reader = gguf.GGUFReader(path)

    def value(key):
        field = reader.fields[key]
        part = field.parts[field.data[0]]
        return bytes(part).decode() if field.types[0].name == "STRING" else float(part[0])

    assert (value("general.type"), value("adapter.type"), value("general.architecture")) == ("adapter", "lora", "llama")
    assert value("adapter.lora.alpha") == 16.0
    tensors = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    assert len(tensors) == 30 * len(TARGETS) * 2
    assert tensors["blk.3.attn_q.weight.lora_a"] == (576, 8)  # ne: [in, r]
    assert tensors["blk.3.attn_k.weight.lora_b"] == (8, 192)  # ne: [r, out]
    assert tensors["blk.29.ffn_down.weight.lora_a"] == (1536, 8)


def test_llama_cpp_with_the_adapter_shifts_logits_like_hf(small_hf, hf_lora, adapter_dir):
    from kate.llm.llamacpp import LlamaCppChatModel
    from kate.llm.lora import GGUF_MARKER, GGUF_NAME

    base = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=1024, max_parallel=1)
    lora = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=1024, max_parallel=1, lora=str(adapter_dir))
    off = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=1024, max_parallel=1, lora=str(adapter_dir), lora_scale=0.0)
    try:
        assert (adapter_dir / GGUF_NAME).is_file() and (adapter_dir / GGUF_MARKER).is_file()
        runtime = lora.runtime()
        assert runtime["lora"] == str((adapter_dir / GGUF_NAME).resolve())
        assert runtime["lora_sha256"] == sha256_of(adapter_dir / GGUF_NAME)
        assert lora.name != base.name and "lora" not in base.runtime()
        agree = 0
        for messages in PROMPTS:
            llama_base, llama_lora = _llama_logits(base, messages), _llama_logits(lora, messages)
            hf_base = small_hf.next_token_logits(messages).numpy()
            hf_adapted = hf_lora.next_token_logits(messages).numpy()
            llama_delta, hf_delta = llama_lora - llama_base, hf_adapted - hf_base
            corr = np.corrcoef(llama_delta, hf_delta)[0, 1]
            slope = float(llama_delta @ hf_delta / (hf_delta @ hf_delta))
            assert corr > 0.9, (corr, slope)
            assert 0.7 < slope < 1.4, (corr, slope)  # alpha / r applied once (observed 1.0-1.1)
            agree += int(llama_lora.argmax()) == int(hf_adapted.argmax())
            np.testing.assert_allclose(_llama_logits(off, messages), llama_base, atol=1e-3)
        assert agree >= len(PROMPTS) - 1  # the top token, up to one near-tie the Q4 kernels may flip
        texts = [(lora.chat(m, max_tokens=8)[0].text, base.chat(m, max_tokens=8)[0].text) for m in PROMPTS]
        assert any(adapted != plain for adapted, plain in texts)
    finally:
        for model in (base, lora, off):
            model.close()


def test_the_converted_adapter_is_cached_and_redone_when_the_weights_change(adapter_dir, tmp_path):
    from safetensors.numpy import load_file, save_file

    from kate.llm.lora import GGUF_NAME, llama_adapter

    folder = tmp_path / "adapter"
    shutil.copytree(adapter_dir, folder)
    first = llama_adapter(folder, base=SMALL_TEST_MODEL)
    assert first == folder / GGUF_NAME
    stamp = first.stat().st_mtime_ns
    assert llama_adapter(folder, base=SMALL_TEST_MODEL).stat().st_mtime_ns == stamp  # reused
    before = sha256_of(first)
    weights = load_file(folder / "adapter_model.safetensors")
    save_file({k: v * 2 for k, v in weights.items()}, folder / "adapter_model.safetensors")
    assert sha256_of(llama_adapter(folder, base=SMALL_TEST_MODEL)) != before


def _fake_adapter(folder: Path, **config) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    base = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "base_model_name_or_path": SMALL_TEST_MODEL,
            "target_modules": ["q_proj"], "bias": "none"}  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps({**base, **config}))
    save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": np.zeros((8, 576), np.float32),
               "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": np.zeros((576, 8), np.float32)},
              folder / "adapter_model.safetensors")  # fmt: skip
    return folder


@pytest.mark.parametrize("config, match", [({"use_dora": True}, "use_dora"), ({"use_rslora": True}, "use_rslora"),
                                           ({"alpha_pattern": {"q_proj": 32}}, "alpha_pattern")])  # fmt: skip
def test_unsupported_variants_are_refused(tmp_path, config, match):
    from kate.llm.hf import HFChatModel
    from kate.llm.lora import adapter_to_gguf

    folder = _fake_adapter(tmp_path / "adapter", **config)
    with pytest.raises(ValueError, match=rf"adapter_config\.json.*{match}"):
        adapter_to_gguf(folder)
    with pytest.raises(ValueError, match=match):
        HFChatModel(str(folder), device="cpu")


def test_unmappable_modules_are_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    from kate.llm.lora import adapter_to_gguf

    folder = _fake_adapter(tmp_path / "adapter")
    adapter_to_gguf(folder)  # the plain one converts
    weights = load_file(folder / "adapter_model.safetensors")
    # SmolLM2 ties lm_head to the embeddings: its GGUF has no output.weight to adapt
    weights["base_model.model.lm_head.lora_A.weight"] = np.zeros((8, 576), np.float32)
    weights["base_model.model.lm_head.lora_B.weight"] = np.zeros((49152, 8), np.float32)
    save_file(weights, folder / "adapter_model.safetensors")
    with pytest.raises(ValueError, match=r"adapter_model\.safetensors.*lm_head"):
        adapter_to_gguf(folder, tmp_path / "out.gguf")
    weights.pop("base_model.model.lm_head.lora_A.weight"), weights.pop("base_model.model.lm_head.lora_B.weight")
    weights["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"] = np.ones(576, np.float32)
    save_file(weights, folder / "adapter_model.safetensors")
    with pytest.raises(ValueError, match="lora_magnitude_vector"):
        adapter_to_gguf(folder, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()
