// The feature browser: search an SAE's features, read one (dataset top contexts, density,
// histogram, logit weights), click a prompt's token for its strongest features, steer, and
// compare two prompts. Every string from a prompt or a model is written as text
// (textContent); the state lives in the URL's hash (model, feature, prompt).
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const state = { model: "", feature: null, prompt: "" };

  const { api, setBusy } = InterpApi;
  const { show: showError, clear: clearError } = InterpApi.errorBox("fb-error");

  function el(tag, text, className) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  // Whitespace made visible, as the dashboard and the reports show it.
  function visible(text) {
    return String(text).replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
  }

  function featureLink(feature, label) {
    const link = el("span", label || "#" + feature, "feature-link");
    link.dataset.feature = String(feature);
    link.addEventListener("click", run(() => showFeature(feature)));
    return link;
  }

  // Tokens as spans shaded by activation (peak: full colour); `top` outlined.
  function shaded(tokens, acts, peak, top) {
    const line = el("span");
    tokens.forEach((token, i) => {
      const act = acts ? acts[i] : 0;
      const span = el("span", visible(token));
      const alpha = peak > 0 ? Math.max(0, Math.min(1, act / peak)) : 0;
      span.style.background = `rgba(255, 120, 0, ${alpha.toFixed(3)})`;
      span.title = `${JSON.stringify(token)}: ${act.toFixed(3)}`;
      if (i === top) span.className = "top";
      line.appendChild(span);
    });
    return line;
  }

  function readHash() {
    const hash = new URLSearchParams(location.hash.slice(1));
    state.model = hash.get("model") || "";
    const feature = hash.get("feature");
    state.feature = feature === null || feature === "" ? null : parseInt(feature, 10);
    state.prompt = hash.get("prompt") || "";
  }

  function writeHash() {
    const hash = new URLSearchParams();
    hash.set("model", state.model);
    if (state.feature !== null) hash.set("feature", String(state.feature));
    if (state.prompt) hash.set("prompt", state.prompt);
    history.replaceState(null, "", location.pathname + location.search + "#" + hash.toString());
  }

  // ------------------------------------------------------------------ model
  async function loadInfo() {
    const info = await api("features/" + encodeURIComponent(state.model));
    const data = info.data === undefined ? "no dataset (start the server with --data FILE)" :
      `${info.n_tokens.toLocaleString()} tokens of ${info.data}; L0 ${info.l0.toFixed(1)}; ` +
      `dead ${(100 * info.dead_fraction).toFixed(1)}%`;
    $("fb-info").textContent = `${info.hook}, ${info.d_sae} features; ${data}`;
  }

  // ------------------------------------------------------------------ search
  async function search() {
    const query = $("search-query").value.trim();
    if (!query) return;
    const data = await api("features/search", { model: state.model, query, by: $("search-by").value });
    const items = data.results.map((r) => {
      const item = el("li");
      item.append(featureLink(r.feature));
      item.append(el("span", `density ${(100 * r.density).toFixed(2)}%, max ${r.max.toFixed(2)}, ` +
        `promotes ${r.promotes.map(visible).join(" ")}`, "muted"));
      return item;
    });
    $("search-results").replaceChildren(...(items.length ? items : [el("li", "no feature found", "muted")]));
  }

  // ------------------------------------------------------------------ prompt
  async function showPrompt() {
    if (!state.prompt) return;
    const data = await api("features/prompt", { model: state.model, prompt: state.prompt });
    $("fb-tokens").replaceChildren(...data.tokens.map((token, i) => {
      const span = el("span", visible(token), "token");
      span.appendChild(el("sub", String(i)));
      span.dataset.position = String(i);
      span.addEventListener("click", run(() => showTokenFeatures(i)));
      return span;
    }));
    $("token-features").replaceChildren(el("span", "click a token to see its strongest features", "muted"));
  }

  async function showTokenFeatures(position) {
    const data = await api("features/token", { model: state.model, prompt: state.prompt, position });
    for (const span of $("fb-tokens").children) {
      span.classList.toggle("selected", span.dataset.position === String(position));
    }
    const box = el("div");
    box.append(el("strong", `Strongest features on ${JSON.stringify(visible(data.token))} (position ${data.position}): `));
    for (const f of data.features) box.append(featureLink(f.feature, `#${f.feature} ${f.activation.toFixed(2)}`));
    if (!data.features.length) box.append(el("span", "no feature is active here", "muted"));
    $("token-features").replaceChildren(box);
  }

  // ------------------------------------------------------------------ a feature
  function histogram(hist) {
    const first = hist.counts.findIndex((c) => c > 0);
    if (first < 0) return el("p", "never active on the dataset", "muted");
    const last = hist.counts.length - 1 - [...hist.counts].reverse().findIndex((c) => c > 0);
    const peak = Math.max(...hist.counts);
    const bars = el("div", undefined, "histogram");
    for (let i = first; i <= last; i++) {
      const bar = el("div");
      bar.style.height = `${(100 * hist.counts[i]) / peak}%`;
      bar.title = `${hist.edges[i].toPrecision(2)} to ${hist.edges[i + 1].toPrecision(2)}: ${hist.counts[i]} tokens`;
      bars.appendChild(bar);
    }
    const axis = el("div", undefined, "axis");
    axis.append(el("span", hist.edges[first].toPrecision(2)), el("span", "activation (log scale)"),
      el("span", hist.edges[last + 1].toPrecision(2)));
    const box = el("div");
    box.style.width = `${Math.max(160, 9 * (last - first + 1))}px`;
    box.append(bars, axis);
    return box;
  }

  async function showFeature(feature) {
    clearError();
    state.feature = feature;
    writeHash();
    $("steer-feature").value = String(feature);
    const query = state.prompt ? "?prompt=" + encodeURIComponent(state.prompt) : "";
    const data = await api(`features/${encodeURIComponent(state.model)}/${feature}${query}`);
    $("feature-section").hidden = false;
    $("feature-title").textContent = `${data.hook} feature ${data.feature}`;
    const contexts = [];
    if (data.dataset) {
      const d = data.dataset;
      $("feature-stats").textContent = `Active on ${(100 * d.density).toFixed(3)}% of ` +
        `${d.n_tokens.toLocaleString()} tokens of ${d.data}; mean when active ` +
        `${d.mean_active.toFixed(3)}; max ${d.max.toFixed(3)}.`;
      for (const c of d.contexts) {
        const line = el("div", undefined, "ctx");
        line.append(el("span", c.value.toFixed(3), "value"), shaded(c.tokens, c.acts, d.contexts[0].value, c.index));
        contexts.push(line);
      }
      if (!contexts.length) contexts.push(el("p", "active on no token of the dataset", "muted"));
      $("feature-histogram").replaceChildren(histogram(d.histogram));
    } else {
      $("feature-stats").textContent = "No dataset statistics: start the server with --data FILE.";
      $("feature-histogram").replaceChildren();
    }
    $("feature-contexts").replaceChildren(...contexts);
    if (data.prompt) {
      const peak = Math.max(...data.prompt.acts);
      $("feature-prompt").replaceChildren(shaded(data.prompt.tokens, data.prompt.acts, peak,
        peak > 0 ? data.prompt.acts.indexOf(peak) : -1), el("span", `  max ${peak.toFixed(3)}`, "muted"));
    } else {
      $("feature-prompt").replaceChildren(el("span", "type a prompt above", "muted"));
    }
    $("feature-logits").tBodies[0].replaceChildren(...data.promoted.map((up, i) => {
      const down = data.suppressed[i];
      const row = el("tr");
      row.append(el("td", visible(up.token), "text"), el("td", up.weight.toFixed(3)),
        el("td", visible(down.token), "text"), el("td", down.weight.toFixed(3)));
      return row;
    }));
  }

  // ------------------------------------------------------------------ steering
  function showTarget() {
    const target = $("steer-target").value;
    for (const label of document.querySelectorAll("#steer-form [data-for]")) {
      label.hidden = label.dataset.for !== target;
    }
    $("steer-value").disabled = $("steer-mode").value === "ablate";
  }

  function topRows(top) {
    return top.map((t) => {
      const row = el("tr");
      row.append(el("td", visible(t.token), "text"), el("td", t.logit.toFixed(3)), el("td", t.prob.toFixed(4)));
      return row;
    });
  }

  async function steer() {
    if (!state.prompt) throw new Error("Type a prompt first.");
    const target = $("steer-target").value;
    const edit = { target, mode: $("steer-mode").value, value: parseFloat($("steer-value").value) || 0 };
    if (target === "feature") edit.feature = parseInt($("steer-feature").value, 10);
    if (target === "neuron") {
      edit.layer = parseInt($("steer-layer").value, 10);
      edit.neuron = parseInt($("steer-neuron").value, 10);
    }
    if (target === "direction") {
      edit.hook_name = $("steer-hook").value;
      edit.direction_token = $("steer-token").value;
    }
    const body = { model: state.model, prompt: state.prompt, edits: [edit],
      n_new: parseInt($("steer-new").value, 10) || 0 };
    const data = await api("steer", body);
    $("steer-base-text").textContent = visible(state.prompt) + " \u2192 " + visible(data.baseline.continuation);
    $("steer-text").textContent = visible(state.prompt) + " \u2192 " + visible(data.steered.continuation);
    $("steer-base").tBodies[0].replaceChildren(...topRows(data.baseline.top));
    $("steer-steered").tBodies[0].replaceChildren(...topRows(data.steered.top));
  }

  // ------------------------------------------------------------------ comparing
  async function compareOne(prompt, target) {
    const body = { model: state.model, prompt };
    if (state.feature !== null) body.feature = state.feature;
    const data = await api("features/prompt", body);
    const column = el("div");
    column.append(el("h3", JSON.stringify(visible(prompt))));
    if (data.acts) {
      column.append(el("p", `feature #${state.feature}, max ${Math.max(...data.acts).toFixed(3)}:`, "muted"));
      const line = el("div", undefined, "ctx");
      line.append(shaded(data.tokens, data.acts, Math.max(...data.acts), -1));
      column.append(line);
    }
    column.append(el("p", "next: " + data.predictions.map((p) => `${visible(p.token)} ${p.prob.toFixed(3)}`).join(", ")));
    const features = el("p");
    features.append(el("span", "strongest features: ", "muted"));
    for (const f of data.features) features.append(featureLink(f.feature, `#${f.feature} ${f.max.toFixed(2)}`));
    column.append(features);
    target.replaceChildren(column);
  }

  async function compare() {
    const a = $("compare-a").value;
    const b = $("compare-b").value;
    if (!a || !b) throw new Error("Give both prompts to compare.");
    await Promise.all([compareOne(a, $("compare-left")), compareOne(b, $("compare-right"))]);
  }

  // ------------------------------------------------------------------ wiring
  function run(action) {
    return (event) => {
      if (event) event.preventDefault();
      clearError();
      Promise.resolve().then(action).catch(showError);
    };
  }

  async function start() {
    setBusy(0);
    readHash();
    $("search-form").addEventListener("submit", run(search));
    $("fb-prompt-form").addEventListener("submit", run(async () => {
      state.prompt = $("fb-prompt").value;
      writeHash();
      await showPrompt();
      if (state.feature !== null) await showFeature(state.feature);
    }));
    $("steer-form").addEventListener("submit", run(steer));
    $("steer-target").addEventListener("change", showTarget);
    $("steer-mode").addEventListener("change", showTarget);
    $("compare-form").addEventListener("submit", run(compare));
    $("fb-model").addEventListener("change", run(async () => {
      state.model = $("fb-model").value;
      state.feature = null;
      $("feature-section").hidden = true;
      $("search-results").replaceChildren();
      writeHash();
      await loadInfo();
      await showPrompt();
    }));
    showTarget();
    const models = (await api("models")).models.filter((m) => m.has_sae);
    if (!models.length) throw new Error("No model here has an SAE: start the server with --sae NAME.");
    $("fb-model").replaceChildren(...models.map((m) => el("option", m.name)));
    if (!models.some((m) => m.name === state.model)) state.model = models[0].name;
    $("fb-model").value = state.model;
    $("fb-prompt").value = state.prompt;
    await loadInfo();
    await showPrompt();
    if (state.feature !== null) await showFeature(state.feature);
    document.body.dataset.ready = "1";
  }

  start().catch(showError);
})();
