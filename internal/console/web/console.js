// The console's few behaviours in the browser: the overview reloads itself, a select with
// data-toggle shows only the labels (data-show) that belong to its choice, and a form with
// data-confirm asks first.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const ov = document.getElementById("overview");
  if (ov && ov.dataset.refresh) {
    const secs = Math.max(1, Number(ov.dataset.refresh));
    setTimeout(() => location.reload(), secs * 1000);
  }
  for (const sel of document.querySelectorAll("select[data-toggle]")) {
    const form = sel.form;
    const sync = () => {
      for (const el of form.querySelectorAll("[data-show]")) {
        el.hidden = el.dataset.show !== sel.value;
      }
    };
    sel.addEventListener("change", sync);
    sync();
  }
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (e) => {
      if (!confirm(form.dataset.confirm)) e.preventDefault();
    });
  }
});
