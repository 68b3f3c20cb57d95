// The language switch keeps the reader's place: the twin page opens at the same section. A lesson and its
// translation have the same sections in the same order (the Chinese cells are translated one to one), so the
// n-th section of one is the n-th of the other; where the counts differ (a page translated in part), the twin
// opens at its top.
(function () {
  "use strict";
  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("article.bd-article section[id]"));
  }
  function current(all) {
    var k = -1;
    all.forEach(function (s, i) { if (s.getBoundingClientRect().top <= 90) { k = i; } });
    return k;
  }
  document.addEventListener("DOMContentLoaded", function () {
    var link = document.querySelector("a.fp16lab-lang-other");
    if (link) {
      link.addEventListener("click", function (event) {
        var all = sections(), k = current(all);
        if (k > 0) {
          event.preventDefault();
          window.location.href = link.href.split("#")[0] + "#fp16lab-section-" + k + "-of-" + all.length;
        }
      });
    }
    var m = window.location.hash.match(/^#fp16lab-section-(\d+)-of-(\d+)$/);
    if (m) {
      var all = sections();
      if (all.length === Number(m[2]) && all[Number(m[1])]) {
        var go = function () { all[Number(m[1])].scrollIntoView(); };
        go();
        window.addEventListener("load", go);  // again once the images have their size
      }
    }
  });
})();
