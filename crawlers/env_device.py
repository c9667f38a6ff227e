"""What an episode's page really showed of its randomisation: the theme and the language.

The crawl asks the browser for a colour scheme and a locale, but a
third-party app may ignore either (a light-only app, an English-only UI). The
trajectory records what the start page showed, read once setup and wait_for
are done:
- theme: dark when the background behind most of five points of the viewport
  (the centre and four inset corners; the first opaque background up the
  tree, else the canvas of the page's colour scheme) is dark, else light;
- locale: the page's `<html lang>`, else the script of its text (Chinese or
  Latin); the emulated locale is kept when it agrees with that language or
  when the page says nothing.
"""

from __future__ import annotations

from schemas.records import DeviceProfile

from .randomise import LOCALES

_SHOWN_JS = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const rgba = (c) => { ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = c; ctx.fillRect(0, 0, 1, 1);
    return ctx.getImageData(0, 0, 1, 1).data; };
  const dark = (d) => (0.2126 * d[0] + 0.7152 * d[1] + 0.0722 * d[2]) / 255 < 0.5;
  const root = document.documentElement;
  const meta = document.querySelector('meta[name="color-scheme"]');
  const scheme = (getComputedStyle(root).colorScheme + ' ' + (meta ? meta.content : '')).toLowerCase();
  const canvasDark = scheme.includes('dark')
    && (matchMedia('(prefers-color-scheme: dark)').matches || !scheme.includes('light'));
  const w = innerWidth, h = innerHeight;
  const points = [[w / 2, h / 2], [8, 8], [w - 8, 8], [8, h - 8], [w - 8, h - 8]];
  let votes = 0;
  for (const [x, y] of points) {
    let el = document.elementFromPoint(x, y), shown = null;
    for (; el && shown === null; el = el.parentElement) {
      const d = rgba(getComputedStyle(el).backgroundColor);
      if (d[3] >= 230) shown = dark(d);  // a see-through one (a modal backdrop) shows what is behind
    }
    votes += (shown === null ? canvasDark : shown) ? 1 : -1;
  }
  let lang = (root.getAttribute('lang') || '').trim() || null;
  if (!lang && document.body) {
    const text = document.body.innerText.slice(0, 5000);
    const cjk = (text.match(/[\\u4e00-\\u9fff]/g) || []).length;
    const latin = (text.match(/[A-Za-z]/g) || []).length;
    lang = cjk && cjk * 3 >= latin ? 'zh' : latin ? 'en' : null;
  }
  return {dark: votes > 0, lang};
}"""


def observed_device(page, device: DeviceProfile) -> DeviceProfile:
    """`device` with the theme and locale the page showed (unchanged where it cannot tell)."""
    try:
        shown = page.evaluate(_SHOWN_JS)
    except Exception:  # noqa: BLE001 - the page is navigating: keep what was asked for
        return device
    return device.model_copy(
        update={
            "theme": "dark" if shown.get("dark") else "light",
            "locale": observed_locale(device.locale, shown.get("lang")),
        }
    )


def observed_locale(emulated: str, lang: str | None) -> str:
    """The locale to record: the emulated one unless the page's language says otherwise."""
    if not lang:
        return emulated
    primary = lang.split("-")[0].lower()
    if primary == emulated.split("-")[0].lower():
        return emulated  # they agree: the emulated one names the region too
    return LOCALES.get(primary, lang) if "-" not in lang else lang
