"""Personal-data placeholder tokens in a training set: none may be in a target.

Placeholders ([EMAIL], [PHONE], [CN_ID], [BANK_CARD], [ADDRESS]: filters.pii's
redaction tokens) in a target teach a model to type "[EMAIL]". Curation
keeps synthetic values and gives real ones format-preserving surrogates, so
a set built from it has none; `placeholder_counts` proves it on the written
shards (the blocking checks `<set>_no_placeholder_targets`). The target is
the gpt turn (and the parsed `answer`); the prompts (system and human turns)
are counted too, reported but not failed on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filters.pii import PLACEHOLDERS

PLACEHOLDER = re.compile("|".join(re.escape(p) for p in sorted(PLACEHOLDERS.values())))
_EXAMPLES = 5


def placeholder_tokens(text: str) -> list[str]:
    return PLACEHOLDER.findall(text or "")


def _target_text(sample: dict) -> str:
    gpt = [t.get("value", "") for t in sample.get("conversations", []) if t.get("from") == "gpt"]
    return "\n".join(gpt) + "\n" + json.dumps(sample.get("answer", {}), ensure_ascii=False)


def count_samples(samples: Iterable[tuple[str, dict]]) -> dict[str, Any]:
    """{samples, targets_with_placeholder, prompts_with_placeholder, tokens_in_targets,
    tokens_in_prompts, examples} over (key, sample JSON) pairs."""
    n = targets = prompts = 0
    in_targets: Counter[str] = Counter()
    in_prompts: Counter[str] = Counter()
    examples: list[dict] = []
    for key, sample in samples:
        n += 1
        t = placeholder_tokens(_target_text(sample))
        p = placeholder_tokens(
            "\n".join(
                turn.get("value", "") for turn in sample.get("conversations", []) if turn.get("from") != "gpt"
            )
        )
        in_targets.update(t)
        in_prompts.update(p)
        targets += bool(t)
        prompts += bool(p)
        if t and len(examples) < _EXAMPLES:
            examples.append({"key": key, "tokens": sorted(set(t)), "mode": sample.get("mode")})
    return {
        "samples": n,
        "targets_with_placeholder": targets,
        "prompts_with_placeholder": prompts,
        "tokens_in_targets": dict(sorted(in_targets.items())),
        "tokens_in_prompts": dict(sorted(in_prompts.items())),
        "examples": examples,
    }


def placeholder_counts(shard_dir: Path | str) -> dict[str, Any]:
    """`count_samples` over a written set's shards (images skipped)."""
    from trajforge.publish.shards import iter_tar_samples, read_manifest

    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)

    def samples():
        for shard in manifest["shards"]:
            for key, sample in iter_tar_samples(shard_dir / shard["name"], images=False):
                if "json" in sample:
                    yield key, sample["json"]

    return count_samples(samples())
