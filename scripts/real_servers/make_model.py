"""Write a tiny Llama model folder that vLLM serves with `--load-format dummy` (no weights).

The tokenizer is the byte-level BPE the workload tests use
(crates/kneepoint-workload/tests/fixtures/tokenizer.json) with `<s>` and `</s>` added, so the
client (kneepoint --tokenizer DIR/tokenizer.json) and the server count prompts alike; the chat
template is a plain role-tagged one whose per-message overhead is a constant.
Usage: python make_model.py OUT_DIR
"""

import json
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "crates/kneepoint-workload/tests/fixtures/tokenizer.json"

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = json.loads(FIXTURE.read_text())
    base = len(tok["model"]["vocab"])
    tok["added_tokens"] = [
        {"id": base + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, t in enumerate(["<s>", "</s>"])
    ]
    (out / "tokenizer.json").write_text(json.dumps(tok))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }))
    (out / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    (out / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": base + 40,
        "bos_token_id": base,
        "eos_token_id": base + 1,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": base, "eos_token_id": base + 1}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
