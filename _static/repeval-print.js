// repeval book: every closed dropdown prints open (see _static/repeval-print.css), and the
// ones opened for printing close again once the print dialog is done.
(function () {
  "use strict";
  var opened = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details.sd-dropdown:not([open])").forEach(function (d) {
      d.setAttribute("open", "");
      opened.push(d);
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) {
      d.removeAttribute("open");
    });
    opened = [];
  });
})();
