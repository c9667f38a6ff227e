"""A chat template that renders tools and tool calls for Qwen-VL style processors.

TRL's GRPOTrainer with `tools` or `environment_factory` refuses a processor whose chat
template cannot render a whole tool-calling exchange (trl's `supports_tool_calling`:
user -> assistant with `tool_calls` -> tool), and parses the model's tool calls with the
tokenizer's `response_template` (transformers' `parse_response`). Qwen2-VL's own template
(the tiny model's, trajforge/vlm/tiny.py) renders neither, so `enable_tool_calling` puts
this one on the processor and its tokenizer, with the parser that reads what it renders:

- `tools` go in the system turn, one JSON schema a line inside `<tools></tools>`;
- an assistant's tool calls as `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`;
- a tool's result as a user turn `<tool_response>\\n...\\n</tool_response>`, whose image
  parts become the vision placeholders as in any turn.

Every turn is rendered from its own message only, so a conversation's rendering is a
prefix of any longer one's (TRL's multi-turn loop needs that).
"""

from __future__ import annotations

from typing import Any

# Written with literal newlines; each becomes an expression ({{ '\\n' }}), which Jinja's
# trim_blocks / lstrip_blocks (transformers' settings) leave alone.
_TEMPLATE = (
    "{% macro render(content) %}"
    "{% if content is string %}{{ content }}"
    "{% elif content %}{% for part in content %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% endmacro %}"
    "{% if messages[0]['role'] == 'system' %}"
    "<|im_start|>system\n{{ render(messages[0]['content']) }}"
    "{% else %}<|im_start|>system\nYou are a helpful assistant.{% endif %}"
    "{% if tools %}\n\n# Tools\n\nYou may call one or more functions. Their signatures, "
    "one a line:\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    "Return each call as a JSON object within <tool_call></tool_call> tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    "{% endif %}<|im_end|>\n"
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "<|im_start|>user\n<tool_response>\n{{ render(message['content']) }}\n</tool_response><|im_end|>\n"
    "{% elif message['role'] == 'assistant' %}"
    "<|im_start|>assistant\n{{ render(message['content']) }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{% set fn = call['function'] if 'function' in call else call %}"
    "{% if not loop.first %}\n{% endif %}"
    '<tool_call>\n{"name": "{{ fn["name"] }}", "arguments":'
    "{% if fn['arguments'] is string %} {{ fn['arguments'] }}{% else %} {{ fn['arguments'] | tojson }}{% endif %}"
    "}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% elif not (loop.first and message['role'] == 'system') %}"
    "<|im_start|>{{ message['role'] }}\n{{ render(message['content']) }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOL_CHAT_TEMPLATE = _TEMPLATE.replace("\n", "{{ '\\n' }}")

# transformers' response template (`tokenizer.response_template`, read by `parse_response`):
# the assistant's text up to its first <tool_call>, then each call's JSON.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def enable_tool_calling(processor):
    """Put TOOL_CHAT_TEMPLATE on `processor` (and on its tokenizer, when it has one) and
    RESPONSE_TEMPLATE on the tokenizer; returns `processor`."""
    tokenizer = getattr(processor, "tokenizer", processor)
    processor.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return processor
