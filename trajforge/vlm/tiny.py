"""A tiny Qwen2-VL with random weights and an offline BPE tokenizer.

Real weights cannot be downloaded here. Tests, the demo and the benchmark need a
model that loads through the same Auto classes and code paths as a real Qwen2-VL
checkpoint, so this builds one from a config (hidden 64, 2 text layers, vision
depth 2), trains a byte-level BPE on a small EN+ZH corpus with the Qwen chat
special tokens, and saves it with `save_pretrained`. Its output is noise: it is
for plumbing, never for judging anything.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

TINY_VERSION = "1"
MARKER = "tiny_vlm.json"
SEED = 1234
# Small images keep CPU inference fast: at most 112x112 pixels = 16 image tokens.
TINY_MIN_PIXELS = 28 * 28
TINY_MAX_PIXELS = 112 * 112

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2-VL's own chat template (image parts become the vision placeholders).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = """
You are a helpful assistant. Judge whether the agent completed the task.
Answer with one JSON object: {"success": true, "irrelevant_steps": [0, 1], "reason": "..."}
{"success": false, "irrelevant_steps": [], "reason": "the cart is empty"}
Task: add the blue shirt to the cart and check out. Step 0: tap (0.512,0.301) button "Add to cart".
Step 1: type 'hello world' into textbox "Search". Step 2: scroll down. Step 3: key 'Enter'. done.
button link textbox checkbox combobox heading menu menuitem tab dialog list listitem image
Search Settings Login Sign in Sign out Submit Cancel Save Delete Edit Send Reply Compose Inbox
Shop Cart Checkout Price Quantity Order Notes New note Title Body Profile Follow Like Post Comment
Dark mode Language Notifications Address Phone Email Delivery Restaurant Menu Pay Confirm Back Home
0 1 2 3 4 5 6 7 8 9 10 12 25 50 100 0.5 0.25 0.125 1280 800 true false null yes no
[ ] { } : , " ' ( ) . ; ! ? - _ / \\ = + * # @ & % < > |
screenshot step action tap double_tap long_press swipe scroll type key open_app back home wait
select answer take_over done url page element role name box success failure reason irrelevant
请判断智能体是否完成了任务。 用一个JSON对象回答。 成功 失败 原因 无关步骤 截图 步骤 动作 点击 输入 滑动 返回 主页 等待 完成
搜索 设置 登录 注册 退出 提交 取消 保存 删除 编辑 发送 回复 写邮件 收件箱 购物车 结算 价格 数量 订单 笔记 新建笔记
标题 正文 个人资料 关注 点赞 评论 深色模式 语言 通知 地址 电话 邮箱 外卖 餐厅 菜单 支付 确认 蓝色衬衫 加入购物车
任务：把蓝色衬衫加入购物车并结算。 第0步：点击按钮“加入购物车”。 第1步：在搜索框输入“你好”。
"""


def _text_config(vocab_size: int, ids: dict[str, int]) -> dict:
    return {
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        # head_dim 16 -> 8 rotary frequencies split over (time, height, width).
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


def _train_tokenizer(vocab_size: int = 1024):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([line for line in _CORPUS.splitlines() if line.strip()] * 4, trainer)
    return tok


def _build_processor(tok_object):
    from transformers import PreTrainedTokenizerFast, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from trajforge.vlm.transformers_backend import image_only_processor_class

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok_object,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        padding_side="left",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=4096,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    # The PIL image processor: no torchvision here; the video processor is left out.
    image_processor = Qwen2VLImageProcessorPil(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)
    return image_only_processor_class(Qwen2VLProcessor)(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE
    )


def tiny_qwen2vl_config(vocab_size: int, ids: dict[str, int]):
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(
        text_config=_text_config(vocab_size, ids),
        vision_config={
            "depth": 2,
            "embed_dim": 32,
            "hidden_size": 64,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def build_tiny_vlm(out_dir: Path | str) -> Path:
    """Build (once) the tiny Qwen2-VL at `out_dir` and return that path.

    Idempotent: a marker file written last says the directory is complete; a
    half-built directory (no marker) is rebuilt. Built in a temporary sibling and
    renamed, so concurrent test sessions never see a partial model.
    """
    out = Path(out_dir)
    marker = out / MARKER
    if marker.exists() and json.loads(marker.read_text()).get("version") == TINY_VERSION:
        return out

    import torch
    from transformers import GenerationConfig, Qwen2VLForConditionalGeneration

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tok_object = _train_tokenizer()
        processor = _build_processor(tok_object)
        vocab = processor.tokenizer.get_vocab()
        ids = {t: vocab[t] for t in SPECIAL_TOKENS}
        config = tiny_qwen2vl_config(len(vocab), ids)
        torch.manual_seed(SEED)
        model = Qwen2VLForConditionalGeneration(config).eval()
        # Random init gives nearly flat logits, so float noise from padding could flip
        # greedy choices; a wider output head makes the argmax decisive and batched
        # decoding comparable to one-by-one decoding.
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(SEED))
        model.generation_config = GenerationConfig(
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
            do_sample=False,
        )
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / MARKER).write_text(
            json.dumps(
                {
                    "version": TINY_VERSION,
                    "seed": SEED,
                    "random_weights": True,
                    "parameters": sum(p.numel() for p in model.parameters()),
                    "vocab_size": len(vocab),
                },
                indent=1,
            )
        )
        if out.exists():  # a stale or half-built copy
            shutil.rmtree(out)
        try:
            os.replace(tmp, out)
        except OSError:  # another process won the race: its copy is as good as ours
            if not (out / MARKER).exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def default_tiny_dir() -> Path:
    """$TRAJFORGE_DATA/models/tiny-qwen2vl (./data when the variable is unset)."""
    return Path(os.environ.get("TRAJFORGE_DATA", "data")) / "models" / "tiny-qwen2vl"
