"""Small pictures for Dagster metadata and reports: charts and thumbnails
as base64 images inside markdown, so the Dagster UI shows them inline."""
from __future__ import annotations

import base64
import io
from typing import Mapping

from PIL import Image


def _data_uri(png: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(png).decode()}"


def bar_chart_markdown(counts: Mapping[str, int], title: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    fig, ax = plt.subplots(figsize=(6, 0.35 * max(len(items), 3) + 0.8), dpi=80)
    ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="#3b82f6")
    ax.set_title(title)
    for i, (_, v) in enumerate(items[::-1]):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return f"![{title}]({_data_uri(buf.getvalue())})"


def thumbnails_markdown(images: list[tuple[str, bytes]], width: int = 320) -> str:
    """Captioned JPEG thumbnails of a few screenshots."""
    parts = []
    for caption, data in images:
        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB")
            im.thumbnail((width, width * 4))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=70)
        parts.append(f"**{caption}**\n\n![{caption}]({_data_uri(buf.getvalue(), 'image/jpeg')})")
    return "\n\n".join(parts)
