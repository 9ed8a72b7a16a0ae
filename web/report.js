// The offline report (`faultline attribute --html`): renders the embedded diagnosis with the same
// job view as the live page. Nothing is fetched; the JSON link is a blob of the embedded text.
(function () {
  "use strict";
  var page = document.getElementById("page");
  var text = document.getElementById("diagnosis").textContent;
  var d = JSON.parse(text);
  var link = "#";
  try {
    link = URL.createObjectURL(new Blob([JSON.stringify(d, null, 2) + "\n"], {type: "application/json"}));
  } catch (e) { /* very old browser: the link stays inert */ }
  window.FaultlineView.render(page, d, {job: null, jsonHref: link,
    jsonDownload: "faultline-" + String(d.job_id || "job").replace(/[^A-Za-z0-9_.+-]/g, "_") + ".json"});
  document.title = "faultline: job " + (d.job_id || "") + " — " + (d.sub_domain || "");
  document.body.dataset.ready = "1";
})();
