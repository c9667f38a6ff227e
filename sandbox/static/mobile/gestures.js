/* The gesture contract of the touch-first sandbox apps (see _mobile_layout.html).
 *
 * Every gesture is read from touch events (what a phone, Appium's touch
 * actions and Chromium's touch emulation deliver) and from mouse/pen pointer
 * events (desktop tools); pointer events of a touch are ignored so that one
 * finger is never counted twice. Widgets: carousel, long-press menu,
 * pull-to-refresh, bottom sheet, soft keyboard.
 */
(function () {
  "use strict";
  const ZH = (document.documentElement.lang || "").toLowerCase().startsWith("zh");
  const T = ZH
    ? {pull: "下拉刷新", release: "释放刷新", refreshing: "正在刷新…", handle: "下滑关闭",
       search: "搜索", send: "发送", done: "完成", go: "前往"}
    : {pull: "Pull to refresh", release: "Release to refresh", refreshing: "Refreshing…",
       handle: "Swipe down to close", search: "Search", send: "Send", done: "Done", go: "Go"};
  const SWIPE_MIN = 40;        // px of horizontal travel that moves a carousel
  const MOVE_TOL = 10;         // px a long press may wander
  const HOLD_MS = 500;         // a long press
  const PTR_MIN = 70;          // px of downward pull that refreshes
  const SHEET_CLOSE_MIN = 50;  // px of downward drag on a sheet handle that closes it

  // -- one drag, from touch or from a mouse/pen pointer --------------------------------
  // h.start(x, y, ev) -> true to follow this drag; h.move(dx, dy, ev);
  // h.end(dx, dy, ev, releaseX, releaseY); h.cancel()
  function onDrag(el, h) {
    let drag = null;
    const finish = (ev, cancelled) => {
      const d = drag; drag = null;
      if (!d) return;
      if (cancelled) { if (h.cancel) h.cancel(); } else h.end(d.dx, d.dy, ev, d.x + d.dx, d.y + d.dy);
    };
    el.addEventListener("touchstart", ev => {
      if (ev.touches.length !== 1) { finish(ev, true); return; }
      const t = ev.touches[0];
      drag = h.start(t.clientX, t.clientY, ev) ? {x: t.clientX, y: t.clientY, dx: 0, dy: 0} : null;
    }, {passive: true});
    el.addEventListener("touchmove", ev => {
      if (!drag) return;
      const t = ev.touches[0];
      drag.dx = t.clientX - drag.x; drag.dy = t.clientY - drag.y;
      h.move(drag.dx, drag.dy, ev);
    }, {passive: false});   // handlers may preventDefault to keep the browser from scrolling
    el.addEventListener("touchend", ev => finish(ev, false), {passive: false});
    el.addEventListener("touchcancel", ev => finish(ev, true));
    el.addEventListener("pointerdown", ev => {
      if (ev.pointerType === "touch" || ev.button !== 0) return;
      if (!h.start(ev.clientX, ev.clientY, ev)) return;
      const d = drag = {x: ev.clientX, y: ev.clientY, dx: 0, dy: 0};
      const move = e => { if (drag !== d) return; d.dx = e.clientX - d.x; d.dy = e.clientY - d.y; h.move(d.dx, d.dy, e); };
      const up = e => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
        window.removeEventListener("pointercancel", up);
        if (drag === d) finish(e, e.type === "pointercancel");
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
      window.addEventListener("pointercancel", up);
    });
  }

  // -- the click that follows a long press or a drag is not a tap -------------------------
  // Only a click at the release point, right after it, is swallowed: the next real
  // tap (elsewhere, or later) goes through even when no click followed the release.
  let swallow = null;
  function swallowNextClick(x, y) { swallow = {x, y, until: performance.now() + 350}; }
  // A new finger (or button) down starts a new gesture: its click is a real tap,
  // however soon it comes after the last release (an oracle taps a menu item at once).
  // Not mousedown: the compatibility mousedown that a touch release synthesises
  // comes just before the very click that must be swallowed.
  for (const type of ["touchstart", "pointerdown"]) {
    window.addEventListener(type, () => { swallow = null; }, {capture: true, passive: true});
  }
  window.addEventListener("click", ev => {
    const s = swallow;
    swallow = null;
    if (s && performance.now() < s.until &&
        (s.x === undefined || Math.hypot(ev.clientX - s.x, ev.clientY - s.y) <= 2 * MOVE_TOL)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);

  // -- layers: menus and sheets over a backdrop --------------------------------------------
  const layers = [];
  function openLayer(el) {
    if (!el || layers.some(l => l.el === el)) return;
    // Fixed positioning breaks inside transformed/filtered ancestors: lift it out.
    if (el.parentNode !== document.body) document.body.appendChild(el);
    const backdrop = document.createElement("div");
    backdrop.className = "m-backdrop";
    backdrop.addEventListener("click", () => closeLayer(el));
    document.body.insertBefore(backdrop, el);
    el.hidden = false;
    el.style.transform = "";
    layers.push({el, backdrop});
    el.dispatchEvent(new CustomEvent("m:open", {bubbles: true}));
  }
  function closeLayer(el) {
    const i = layers.findIndex(l => l.el === el);
    if (i < 0) return;
    layers[i].backdrop.remove();
    layers.splice(i, 1);
    el.hidden = true;
    el.style.transform = "";
    el.dispatchEvent(new CustomEvent("m:close", {bubbles: true}));
  }
  document.addEventListener("click", ev => {
    const close = ev.target.closest("[data-close]");
    if (close) {
      const layer = close.closest(".m-sheet, [role='menu']");
      if (layer) { ev.preventDefault(); closeLayer(layer); }
      return;
    }
    const opener = ev.target.closest("[data-sheet]");
    if (opener) { ev.preventDefault(); openLayer(document.getElementById(opener.dataset.sheet)); }
  });

  // -- carousel ---------------------------------------------------------------------
  function setupCarousel(c) {
    const slides = Array.from(c.querySelectorAll("[data-slide]"));
    if (!slides.length) return;
    let dots = c.querySelector(".m-dots");
    if (!dots) {
      dots = document.createElement("div");
      dots.className = "m-dots";
      dots.setAttribute("aria-hidden", "true");
      slides.forEach(() => dots.appendChild(document.createElement("span")));
      c.appendChild(dots);
    }
    const show = i => {
      slides.forEach((s, k) => { s.hidden = k !== i; });
      Array.from(dots.children).forEach((d, k) => d.classList.toggle("on", k === i));
      c.dataset.index = String(i);
    };
    let index = parseInt(c.dataset.index || "0", 10) || 0;
    show(Math.min(Math.max(index, 0), slides.length - 1));
    // A mouse drag over a slide's link or image would start a native drag-and-drop.
    c.addEventListener("dragstart", ev => ev.preventDefault());
    onDrag(c, {
      start: () => true,
      move: (dx, dy, ev) => {
        // A mostly sideways drag is ours, not the page's scroll.
        if (Math.abs(dx) > MOVE_TOL && Math.abs(dx) > Math.abs(dy) && ev.cancelable) ev.preventDefault();
      },
      end: (dx, dy, ev, x, y) => {
        if (Math.abs(dx) <= SWIPE_MIN || Math.abs(dx) <= Math.abs(dy)) return;
        const n = slides.length;
        index = (parseInt(c.dataset.index, 10) + (dx < 0 ? 1 : -1) + n) % n;
        show(index);
        swallowNextClick(x, y);
        c.dispatchEvent(new CustomEvent("m:slide", {bubbles: true, detail: {index}}));
      },
    });
  }

  // -- long press -> context menu ------------------------------------------------------
  function setupLongPress(item) {
    const menu = () => document.getElementById(item.dataset.longpress);
    let timer = null, fired = false;
    const stop = () => { if (timer) clearTimeout(timer); timer = null; item.classList.remove("m-pressing"); };
    const fire = () => { stop(); fired = true; openLayer(menu()); };
    item.addEventListener("dragstart", ev => ev.preventDefault());
    onDrag(item, {
      start: () => {
        stop(); fired = false;
        item.classList.add("m-pressing");
        timer = setTimeout(fire, HOLD_MS);
        return true;
      },
      move: (dx, dy) => { if (timer && Math.hypot(dx, dy) > MOVE_TOL) stop(); },
      end: (dx, dy, ev, x, y) => {
        stop();
        if (fired) {
          if (ev.cancelable) ev.preventDefault();   // no click synthesised from this touch
          swallowNextClick(x, y);
        }
      },
      cancel: stop,
    });
    // What a real Android long press (and a right click) gives.
    item.addEventListener("contextmenu", ev => {
      ev.preventDefault();
      if (!fired) fire();
      swallowNextClick(ev.clientX, ev.clientY);
    });
  }

  // -- pull to refresh ---------------------------------------------------------------
  function setupPullToRefresh(area) {
    const bar = document.createElement("div");
    bar.className = "m-ptr";
    bar.setAttribute("role", "status");
    bar.hidden = true;
    area.prepend(bar);
    let pulling = false, busy = false;
    const reset = () => { pulling = false; bar.classList.remove("pulling"); bar.style.height = "0"; bar.hidden = true; };
    onDrag(area, {
      start: () => !busy && area.scrollTop <= 0,
      move: (dx, dy, ev) => {
        if (!pulling && (dy <= 0 || Math.abs(dx) > Math.abs(dy))) return;
        pulling = dy > 0;
        if (!pulling) { reset(); return; }
        if (ev.cancelable) ev.preventDefault();
        bar.hidden = false;
        bar.classList.add("pulling");
        bar.style.height = Math.min(dy * 0.5, 64) + "px";
        bar.textContent = dy > PTR_MIN ? T.release : T.pull;
      },
      end: (dx, dy) => {
        if (!pulling || dy <= PTR_MIN) { reset(); return; }
        busy = true;
        bar.classList.remove("pulling");
        bar.textContent = T.refreshing;
        fetch(area.dataset.ptr, {method: "POST", credentials: "same-origin"})
          .finally(() => location.reload());
      },
      cancel: reset,
    });
  }

  // -- bottom sheet: drag it down (by its handle, or anywhere while it is scrolled to
  // its top) to close it ----------------------------------------------------------------
  function setupSheet(sheet) {
    let handle = sheet.querySelector("[data-sheet-handle]");
    if (!handle) {
      handle = document.createElement("div");
      handle.className = "m-sheet-handle";
      handle.dataset.sheetHandle = "";
      sheet.prepend(handle);
    }
    handle.setAttribute("role", "button");
    handle.setAttribute("tabindex", "0");
    if (!handle.getAttribute("aria-label")) handle.setAttribute("aria-label", T.handle);
    handle.addEventListener("click", () => closeLayer(sheet));
    onDrag(sheet, {
      start: (x, y, ev) => sheet.scrollTop <= 0 && !ev.target.closest("input, textarea, select"),
      move: (dx, dy, ev) => {
        if (dy <= 0 || Math.abs(dx) > dy) { sheet.style.transform = ""; return; }
        if (ev.cancelable) ev.preventDefault();
        sheet.style.transform = `translateY(${dy}px)`;
      },
      end: (dx, dy, ev, x, y) => {
        if (dy > SHEET_CLOSE_MIN && dy >= Math.abs(dx)) { closeLayer(sheet); swallowNextClick(x, y); }
        else { sheet.style.transform = ""; if (Math.hypot(dx, dy) > MOVE_TOL) swallowNextClick(x, y); }
      },
      cancel: () => { sheet.style.transform = ""; },
    });
    if (sheet.hasAttribute("data-sheet-open")) openLayer(sheet);
  }

  // -- soft keyboard -----------------------------------------------------------------
  const kb = document.getElementById("m-keyboard");
  const actionKey = document.getElementById("m-key-action");
  let kbInput = null, lifted = null;
  const TEXT_TYPES = /^(text|search|email|tel|url|number|password)$/;
  const isTextInput = el => !!el && !el.readOnly && !el.disabled &&
    (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && TEXT_TYPES.test(el.type)));

  function submitFrom(input) {
    const form = input.form;
    if (!form) { input.blur(); return; }
    const submitter = form.querySelector("button[type=submit], button:not([type]), input[type=submit]");
    hideKeyboard();
    form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
  }
  function showKeyboard(input) {
    if (!kb) return;
    kbInput = input;
    actionKey.textContent = T[input.dataset.enterkey] || T.done;
    kb.hidden = false;
    document.body.classList.add("m-kb-open");
    keepAboveKeyboard(input);
  }
  function hideKeyboard() {
    if (!kb || kb.hidden) return;
    kb.hidden = true;
    kbInput = null;
    document.body.classList.remove("m-kb-open");
    if (lifted) { lifted.style.paddingBottom = ""; lifted.style.transform = ""; lifted = null; }
  }
  // The keyboard covers the bottom of the screen, as on a phone; the field being
  // typed into is scrolled (or its [data-kb-lift] bar moved) above it.
  function keepAboveKeyboard(input) {
    const top = kb.getBoundingClientRect().top;
    const r = input.getBoundingClientRect();
    if (r.bottom <= top - 8) return;
    const main = input.closest(".m-main");
    const bar = input.closest("[data-kb-lift]");
    if (bar) {
      lifted = bar;
      bar.style.transform = `translateY(${Math.round(top - r.bottom - 8)}px)`;
    } else if (main) {
      lifted = main;
      main.style.paddingBottom = kb.offsetHeight + "px";
      main.scrollTop += r.bottom - top + 16;
    }
  }
  if (kb) {
    // Keys never take the focus from the field.
    kb.addEventListener("mousedown", ev => ev.preventDefault());
    actionKey.addEventListener("click", () => { if (kbInput) submitFrom(kbInput); });
    kb.addEventListener("click", ev => {
      const key = ev.target.closest(".m-key");
      if (!key || !kbInput) return;
      const input = kbInput, ch = key.dataset.key;
      const start = input.selectionStart ?? input.value.length, end = input.selectionEnd ?? start;
      try {
        if (ch === "⌫") input.setRangeText("", start === end ? Math.max(0, start - 1) : start, end, "end");
        else input.setRangeText(ch, start, end, "end");
      } catch (e) {   // types without a selection API (email, number)
        input.value = ch === "⌫" ? input.value.slice(0, -1) : input.value + ch;
      }
      input.dispatchEvent(new Event("input", {bubbles: true}));
    });
    document.addEventListener("focusin", ev => { if (isTextInput(ev.target)) showKeyboard(ev.target); });
    document.addEventListener("focusout", () => {
      setTimeout(() => { if (!isTextInput(document.activeElement)) hideKeyboard(); }, 0);
    });
    if (isTextInput(document.activeElement)) showKeyboard(document.activeElement);
  }
  // Enter does what the action key does for fields that name one.
  document.addEventListener("keydown", ev => {
    if (ev.key === "Escape") {
      if (layers.length) closeLayer(layers[layers.length - 1].el);
      else if (kbInput) kbInput.blur();
      return;
    }
    if (ev.key !== "Enter" || ev.isComposing) return;
    const el = ev.target;
    if (isTextInput(el) && el.dataset.enterkey) { ev.preventDefault(); submitFrom(el); }
  });

  document.querySelectorAll("[data-carousel]").forEach(setupCarousel);
  document.querySelectorAll("[data-longpress]").forEach(setupLongPress);
  document.querySelectorAll("[data-ptr]").forEach(setupPullToRefresh);
  document.querySelectorAll(".m-sheet").forEach(setupSheet);
  window.mGestures = {openLayer, closeLayer, hideKeyboard};
})();
