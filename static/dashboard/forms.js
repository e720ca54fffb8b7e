// Forms marked data-once send once: their buttons are disabled while the request
// is in flight (the server refuses a second submission of the same form anyway),
// and enabled again when the browser shows the page from its back-forward cache.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-once")) return;
  if (form.dataset.sending) {
    event.preventDefault();
    return;
  }
  form.dataset.sending = "1";
  // After this event: a button disabled now would leave its own value out of the form.
  setTimeout(() => {
    for (const button of form.querySelectorAll("button, input[type=submit]")) {
      button.disabled = true;
    }
    form.setAttribute("aria-busy", "true");
  }, 0);
});

window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const form of document.querySelectorAll("form[data-once]")) {
    delete form.dataset.sending;
    form.removeAttribute("aria-busy");
    for (const button of form.querySelectorAll("button, input[type=submit]")) {
      button.disabled = false;
    }
  }
});
