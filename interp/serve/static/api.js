// What the dashboard (app.js) and the feature browser (features.js) share: JSON requests to
// the server's /api (with the page's ?token= as a bearer token), the count of requests in
// flight (document.body.dataset.busy, which the browser tests wait on) and an error box.
(function () {
  "use strict";

  const TOKEN = new URLSearchParams(location.search).get("token");
  let busy = 0;

  function count(delta) {
    busy += delta;
    document.body.dataset.busy = String(busy);
  }

  // A request or drawing starting (delta > 0) counts at once; one ending counts after the
  // current task, so a chain of them (await one, start the next) never reads as idle between.
  function setBusy(delta) {
    if (delta > 0) count(delta);
    else setTimeout(() => count(delta), 0);
  }

  // The JSON answer of api/<path> (POST when there is a body); a failed request throws an
  // Error with the server's message.
  async function api(path, body, method) {
    const headers = {};
    if (TOKEN) headers.authorization = "Bearer " + TOKEN;
    const options = { method: method || (body ? "POST" : "GET"), headers };
    if (body) {
      headers["content-type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    setBusy(1);
    try {
      const response = await fetch("api/" + path, options);
      const data = await response.json().catch(() => ({ error: response.statusText }));
      if (!response.ok) throw new Error(data.error || response.statusText);
      return data;
    } finally {
      setBusy(-1);
    }
  }

  // show(error) writes an error's message into the element `id` (as text); clear() hides it.
  function errorBox(id) {
    return {
      show(error) {
        const box = document.getElementById(id);
        box.textContent = error instanceof Error ? error.message : String(error);
        box.hidden = false;
      },
      clear() {
        const box = document.getElementById(id);
        box.textContent = "";
        box.hidden = true;
      },
    };
  }

  window.InterpApi = { TOKEN, api, setBusy, errorBox };
})();
