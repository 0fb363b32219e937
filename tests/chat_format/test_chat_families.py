"""detect_family on every real chat template of llama.cpp's collection
(models/templates/*.jinja, extracted by ci/fetch_templates.sh): each file's
family as docs/structured-output.md's table gives it, judged by reading what
the template writes for an assistant's tool calls and reasoning. A template
added to the collection fails the test until it is placed in this table."""
import json
import os
import subprocess
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("FERROX_CACHE_DIR", Path.home() / ".cache" / "ferrox"))
TEMPLATES = CACHE / "templates"
TOOL = os.environ.get("FERROX_CHAT_FAMILY", "")

EXPECTED = {
    "Apertus-8B-Instruct.jinja": "generic",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "generic",
    "Bielik-11B-v3.0-Instruct.jinja": "hermes",
    "ByteDance-Seed-OSS.jinja": "generic",  # <seed:tool_call>, <seed:think>
    "Cohere2MoE.jinja": "generic",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "generic",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "generic",
    "GLM-4.6.jinja": "glm",
    "GLM-4.7-Flash.jinja": "glm",
    "GigaChat3-10B-A1.8B.jinja": "generic",
    "GigaChat3.1-10B-A1.8B.jinja": "generic",
    "HuggingFaceTB-SmolLM3-3B.jinja": "smollm3",
    "Kimi-K2-Instruct.jinja": "generic",
    "Kimi-K2-Thinking.jinja": "think",  # <|tool_calls_section_begin|> is not parsed
    "Kimi-K3.jinja": "generic",
    "LFM2-8B-A1B.jinja": "generic",
    "LFM2.5-8B-A1B.jinja": "think",
    "LFM2.5-Instruct.jinja": "think",
    "MiMo-VL.jinja": "hermes",
    "MiniMax-M1.jinja": "generic",
    "MiniMax-M2.jinja": "think",  # <minimax:tool_call> is not parsed
    "MiniMax-M3.jinja": "generic",  # <mm:think>, <invoke>
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3-coder",
    "NVIDIA-Nemotron-Nano-v2.jinja": "think",  # <TOOLCALL> is not parsed
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "hermes",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen3-coder",
    "Qwen3.5-4B.jinja": "qwen3-coder",
    "Reka-Edge.jinja": "hermes",
    "Spark2.5.jinja": "glm",
    "StepFun3.5-Flash.jinja": "qwen3-coder",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek",
    "deepseek-ai-DeepSeek-V3.2.jinja": "think",  # DSML calls are not parsed
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": "think",
    "deepseek-ai-DeepSeek-V4.jinja": "think",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "functools",
    "google-gemma-2-2b-it.jinja": "generic",
    "google-gemma-4-31B-it-interleaved.jinja": "generic",
    "google-gemma-4-31B-it.jinja": "generic",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "ibm-granite-granite-4.1.jinja": "hermes",
    "inclusionai-ling-3.0-flash.jinja": "glm",
    "llama-cpp-deepseek-r1.jinja": "deepseek",
    "llama-cpp-rwkv-world.jinja": "think",
    "meetkai-functionary-medium-v3.1.jinja": "generic",  # <function=NAME>{json}</function>
    "meetkai-functionary-medium-v3.2.jinja": "generic",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "microsoft-Phi-3.5-mini-instruct.jinja": "generic",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "moonshotai-Kimi-K2.jinja": "generic",
    "muse-glimmer.jinja": "generic",
    "openai-gpt-oss-120b.jinja": "harmony",
    "openbmb-MiniCPM5-1B.jinja": "think",
    "poolside-Laguna-S-2.1.jinja": "glm",
    "poolside-Laguna-XS-2.1.jinja": "glm",
    "poolside-Laguna-XS.2.jinja": "glm",
    "tencent-Hy3.jinja": "generic",
    "unsloth-Apriel-1.5.jinja": "generic",  # <tool_calls>[...] lists
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
    "upstage-Solar-Open-100B.jinja": "generic",
}

# Templates that read `tools` in a family ferrox parses, and some that do not.
SUPPORTS_TOOLS = {
    "Qwen-Qwen3-0.6B.jinja": True,
    "Qwen-Qwen2.5-7B-Instruct.jinja": True,
    "Qwen3-Coder.jinja": True,
    "meta-llama-Llama-3.1-8B-Instruct.jinja": True,
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": True,
    "openai-gpt-oss-120b.jinja": True,
    "GLM-4.6.jinja": True,
    "ibm-granite-granite-3.3-2B-Instruct.jinja": True,
    "fireworks-ai-llama-3-firefunction-v2.jinja": True,
    "HuggingFaceTB-SmolLM3-3B.jinja": False,  # this copy never reads `tools`
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": False,  # nor this one
    "google-gemma-2-2b-it.jinja": False,
    "Kimi-K2-Thinking.jinja": False,
}


@pytest.fixture(scope="module")
def detected():
    paths = sorted(TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []
    if not paths:
        pytest.skip(f"no templates in {TEMPLATES} (run ci/fetch_templates.sh)")
    if not TOOL:
        pytest.skip("FERROX_CHAT_FAMILY is not set (run through ctest)")
    out = subprocess.run([TOOL, *map(str, paths)], capture_output=True, check=True, timeout=60)
    return json.loads(out.stdout)


def test_every_template_gets_the_family_of_the_table(detected):
    assert set(detected) == set(EXPECTED), (
        f"templates not in the table: {sorted(set(detected) - set(EXPECTED))}; "
        f"in the table but absent: {sorted(set(EXPECTED) - set(detected))}")
    wrong = {name: (got["family"], EXPECTED[name]) for name, got in detected.items()
             if got["family"] != EXPECTED[name]}
    counts = {}
    for got in detected.values():
        counts[got["family"]] = counts.get(got["family"], 0) + 1
    print(f"\nfamilies over {len(detected)} templates: {dict(sorted(counts.items()))}")
    assert not wrong, f"(detected, expected): {wrong}"


def test_tool_support_is_the_family_and_the_template_reading_tools(detected):
    wrong = {name: detected[name]["supports_tools"] for name, want in SUPPORTS_TOOLS.items()
             if detected[name]["supports_tools"] != want}
    assert not wrong
