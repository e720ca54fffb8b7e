// The token chart's sample points show their figures on hover and on keyboard
// focus, in the chart's <output> beside the point (no inline script or style: CSP).
"use strict";

function showFigures(event) {
  const point = event.target.closest("a.sample");
  if (!point) return;
  const frame = point.closest(".chart-frame");
  const output = frame.querySelector(".chart-figures");
  const box = frame.getBoundingClientRect();
  const dot = point.getBoundingClientRect();
  output.textContent = point.dataset.figures;
  output.hidden = false;
  const left = Math.min(Math.max(dot.left - box.left, 0), box.width - output.offsetWidth);
  output.style.left = left + "px";
  output.style.top = Math.max(dot.top - box.top - output.offsetHeight - 6, 0) + "px";
}

function hideFigures(event) {
  const point = event.target.closest("a.sample");
  if (point) point.closest(".chart-frame").querySelector(".chart-figures").hidden = true;
}

document.addEventListener("mouseover", showFigures);
document.addEventListener("focusin", showFigures);
document.addEventListener("mouseout", hideFigures);
document.addEventListener("focusout", hideFigures);
