/* repeval book: after MathJax has typeset a page, mark each inline formula (span.math) that is
 * wider than the column it sits in, so that _static/repeval.css lets it scroll inside its own
 * box instead of being clipped by the theme (MathJax 3 does not break lines). Re-checked when
 * the window changes size. Display formulas need no script: the stylesheet makes them scroll.
 * When done, <html data-repeval-layout="done"> tells the browser test that the layout is final. */
(function () {
  "use strict";
  function markWideFormulas() {
    document.querySelectorAll(".bd-article span.math").forEach(function (span) {
      span.classList.remove("repeval-wide-math");
      var formula = span.querySelector("mjx-container");
      var line = span.parentElement;
      while (line && getComputedStyle(line).display === "inline") {
        line = line.parentElement;
      }
      if (formula && line && formula.getBoundingClientRect().width > line.clientWidth) {
        span.classList.add("repeval-wide-math");
      }
    });
    document.documentElement.dataset.repevalLayout = "done";
  }
  function whenTypeset(started) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(markWideFormulas, markWideFormulas);
    } else if (!document.querySelector('script[src*="mathjax"]') || Date.now() - started > 30000) {
      markWideFormulas();
    } else {
      setTimeout(function () { whenTypeset(started); }, 50);
    }
  }
  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(markWideFormulas, 150);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { whenTypeset(Date.now()); });
  } else {
    whenTypeset(Date.now());
  }
})();
