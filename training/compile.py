"""Regional compilation: torch.compile each transformer block, not the whole model.

Every decoder layer (and vision block) has the same code, so one compiled graph
serves all of them: the compile takes seconds, where compiling the whole VLM
(with its data-dependent image handling) takes minutes and breaks on graph
breaks. The blocks are the model's own `_no_split_modules` classes (the units
transformers already treats as indivisible), so this works for any HF VLM.
"""

from __future__ import annotations


def compile_blocks(model) -> int:
    """Compile `model`'s blocks in place; returns how many were compiled (0: none known)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    for block in blocks:
        block.compile()
    return len(blocks)
