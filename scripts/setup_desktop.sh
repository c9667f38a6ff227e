#!/usr/bin/env bash
# What desktop environments need (platform: desktop, crawlers/desktop_*.py): an X server
# without a screen (Xvfb), the accessibility bus (AT-SPI) and its introspection data,
# the headers PyGObject builds against, and the Debian applications the tests play:
# mousepad (text editor), gnumeric (spreadsheet; ssconvert comes with it), pcmanfm
# (file manager, GTK 2: libatk-adaptor bridges it to the bus), yad (a GTK dialog that
# closes: tests/desktop/test_apps_that_close.py). Then
# PyGObject and python-xlib into .venv (the `desktop` extra). Idempotent: each step
# skips itself when its result is there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_apt=()
command -v Xvfb >/dev/null 2>&1 || need_apt+=(xvfb)
command -v dbus-daemon >/dev/null 2>&1 || need_apt+=(dbus-daemon)
[ -x /usr/libexec/at-spi-bus-launcher ] || need_apt+=(at-spi2-core)
[ -f /usr/lib/x86_64-linux-gnu/girepository-1.0/Atspi-2.0.typelib ] \
  || ls /usr/lib/*/girepository-1.0/Atspi-2.0.typelib >/dev/null 2>&1 || need_apt+=(gir1.2-atspi-2.0)
pkg-config --exists gobject-introspection-1.0 2>/dev/null || need_apt+=(libgirepository1.0-dev pkg-config)
pkg-config --exists cairo 2>/dev/null || need_apt+=(libcairo2-dev pkg-config)
# GTK 2 apps (pcmanfm) reach the accessibility bus through this module; GTK 3 has it built in.
ls /usr/lib/*/gtk-2.0/modules/libatk-bridge.so >/dev/null 2>&1 || need_apt+=(libatk-adaptor)
for app in mousepad gnumeric pcmanfm yad; do
  command -v "$app" >/dev/null 2>&1 || need_apt+=("$app")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup-desktop] apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

VPY=.venv/bin/python
if ! $VPY -c "import gi, Xlib; gi.require_version('Atspi', '2.0'); from gi.repository import Atspi" >/dev/null 2>&1; then
  echo "[setup-desktop] pip install the desktop extra (PyGObject, python-xlib)"
  # PyGObject 3.51+ needs girepository-2.0 (GLib 2.80); Debian 12 has GLib 2.74.
  $VPY -m pip install -q "PyGObject>=3.46,<3.51" "python-xlib>=0.33"
fi
