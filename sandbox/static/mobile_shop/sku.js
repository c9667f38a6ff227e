/* The SKU sheet's quantity stepper: − / + change the (read-only) quantity field. */
document.addEventListener("click", ev => {
  const step = ev.target.closest("[data-qty-step]");
  if (!step) return;
  const input = step.closest("[data-qty]").querySelector("input[name=qty]");
  const next = Math.min(Math.max((parseInt(input.value, 10) || 1) + parseInt(step.dataset.qtyStep, 10),
                                 parseInt(input.min, 10) || 1), parseInt(input.max, 10) || 99);
  input.value = String(next);
});
