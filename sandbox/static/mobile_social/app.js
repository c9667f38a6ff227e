/* Pixly / 小橙书 page behaviour on top of the shell's gestures (static/mobile/gestures.js):
 * which post or comment a report is about, reply-to from a comment, topics picked
 * while composing, and the "2/4" counter of a photo carousel. */
(function () {
  "use strict";
  const G = () => window.mGestures;
  const closeLayerOf = el => {
    const layer = el.closest("[role='menu'], .m-sheet");
    if (layer && G()) G().closeLayer(layer);
  };

  document.addEventListener("click", ev => {
    // "Report" in a menu or the share sheet: the report sheet (opened by the shell's
    // data-sheet) posts the target named here; the menu it came from closes.
    const report = ev.target.closest("[data-report]");
    if (report) {
      const input = document.getElementById("report-target");
      if (input) input.value = report.dataset.report;
      closeLayerOf(report);
      return;
    }
    // A tap on a comment (or its menu's Reply) starts a reply in the composer.
    const reply = ev.target.closest("[data-reply]");
    if (reply) {
      const box = document.getElementById("comment-box");
      closeLayerOf(reply);
      if (box) { box.placeholder = reply.dataset.reply; box.focus(); }
      return;
    }
    // A topic picked in the topic sheet joins the post as a chip (tap it to remove).
    const topic = ev.target.closest("[data-topic]");
    if (topic) {
      addTopic(topic.dataset.topic, topic.textContent.trim(), topic.dataset.removeLabel);
      closeLayerOf(topic);
    }
  });

  function addTopic(name, label, removeLabel) {
    const form = document.getElementById("compose-form");
    const chips = document.getElementById("topic-chips");
    if (!form || !chips) return;
    if (Array.from(form.querySelectorAll("input[name=topic]")).some(i => i.value === name)) return;
    const input = document.createElement("input");
    input.type = "hidden"; input.name = "topic"; input.value = name;
    const chip = document.createElement("button");
    chip.type = "button"; chip.className = "px-chip xc-chip on";
    chip.textContent = label + " ✕";
    chip.setAttribute("aria-label", removeLabel || label);
    chip.addEventListener("click", () => { input.remove(); chip.remove(); });
    form.appendChild(input);
    chips.appendChild(chip);
  }

  document.addEventListener("m:slide", ev => {
    const counter = ev.target.querySelector("[data-counter]");
    if (counter) counter.textContent = (ev.detail.index + 1) + "/" + counter.dataset.counter;
  });
})();
