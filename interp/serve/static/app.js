// The dashboard page: asks the JSON API about a prompt and draws the answers.
// Every string from a prompt or a model reaches the page as text: textContent for elements,
// plotText() for plotly (which reads its labels as HTML-like markup); attention patterns draw
// tokens as canvas text (InterpAttention). The view's state lives in the URL's hash.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const PLOT_CONFIG = { displayModeBar: false, responsive: true };
  // interp.viz.plots's scales: light to dark blue; negative red, zero white, positive blue.
  const BLUES = [[0, "#f7fbff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"], [1, "#08306b"]];
  const RDBU = [[0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1, "#2166ac"]];
  const state = {
    model: "", prompt: "", layer: 0, head: null, corrupted: "", answer: "", wrong: "",
    patchAnswer: "", patchWrong: "",
  };
  let models = [];
  let generation = 0; // answers to an older prompt are dropped
  let layerData = null; // the shown layer's patterns
  let job = null; // the running patching job: {id, source}

  // ------------------------------------------------------------------ helpers
  const { api, setBusy } = InterpApi;
  const { show: showError, clear: clearError } = InterpApi.errorBox("error");

  // Each panel: its error box and how to empty it. A panel is emptied when the model or
  // prompt changes and when its own request fails, so it never shows another prompt's answer.
  const PANELS = {
    tokens: () => {
      $("tokens").replaceChildren();
      $("predictions").tBodies[0].replaceChildren();
    },
    attention: () => {
      layerData = null;
      $("head-grid").replaceChildren();
      $("pattern").replaceChildren();
      $("pattern-title").textContent = "";
    },
    lens: () => clearPlot("logit-lens"),
    dla: () => {
      $("dla-summary").textContent = "";
      clearPlot("dla");
    },
    scores: () => {
      $("scores-summary").textContent = "";
      clearPlot("head-scores");
    },
    patching: () => {
      $("patching-state").textContent = "";
      $("patching-progress").hidden = true;
      $("patching-baselines").textContent = "";
      $("patching-warning").textContent = "";
      $("patching-warning").hidden = true;
      clearPlot("patching-resid");
      clearPlot("patching-heads");
    },
    sae: () => {
      $("sae-features").replaceChildren();
      $("sae-token-features").replaceChildren();
    },
  };

  // plotly.js loads asynchronously (index.html), so the first requests go out while it is
  // parsed; a plot waits for it, and is dropped if its element was cleared or redrawn since.
  const plotlyLoaded = new Promise((resolve) => {
    if (window.Plotly) resolve();
    else $("plotly-js").addEventListener("load", () => resolve());
  });
  let plots = 0;

  async function plot(id, traces, layout) {
    const ticket = String(++plots);
    $(id).dataset.plot = ticket;
    setBusy(1); // a plot being drawn counts as busy: the page is still changing
    try {
      await plotlyLoaded;
      if ($(id).dataset.plot === ticket) await Plotly.react($(id), traces, layout, PLOT_CONFIG);
    } finally {
      setBusy(-1);
    }
  }

  function clearPlot(id) {
    $(id).dataset.plot = String(++plots);
    if (window.Plotly) Plotly.purge($(id));
    $(id).replaceChildren();
  }

  function clearPanel(name) {
    PANELS[name]();
    $(name + "-error").textContent = "";
    $(name + "-error").hidden = true;
  }

  function panelError(name, error) {
    PANELS[name]();
    $(name + "-error").textContent = error instanceof Error ? error.message : String(error);
    $(name + "-error").hidden = false;
  }

  // Run a panel's request for the prompt of generation `gen`: its error goes to the panel
  // (which is emptied), unless a newer prompt has been asked for meanwhile.
  async function inPanel(name, gen, load) {
    try {
      await load(gen);
    } catch (error) {
      if (gen === generation) panelError(name, error);
    }
  }

  function el(tag, text, className) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  // A token as a label (interp.analysis.labels.token_label): a space is ␣, a newline ↵, a tab ⇥.
  function visible(text) {
    return String(text).replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
  }

  // plotly renders labels as a small HTML dialect: escape it so each shows literally.
  function plotText(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // Repeated tokens must stay apart on an axis: each label carries its position.
  function positionLabels(tokens) {
    return tokens.map((token, i) => plotToken(token) + "|" + i);
  }

  // A token as a plotly label: whitespace made visible, then escaped.
  function plotToken(token) {
    return plotText(visible(token));
  }

  function symmetricBound(rows) {
    return Math.max(1e-6, ...rows.flat().filter((v) => v !== null).map((v) => Math.abs(v)));
  }

  function plotLayout(title, height, extra) {
    return Object.assign(
      {
        title: { text: plotText(title) },
        height: height,
        margin: { l: 70, r: 30, t: 50, b: 80 },
        template: "plotly_white",
        font: { size: 11 },
      },
      extra || {},
    );
  }

  // ------------------------------------------------------------------ URL state
  function readHash() {
    const hash = new URLSearchParams(location.hash.slice(1));
    state.model = hash.get("model") || state.model;
    state.prompt = hash.get("prompt") || "";
    state.layer = parseInt(hash.get("layer") || "0", 10) || 0;
    const head = hash.get("head");
    state.head = head === null || head === "" ? null : parseInt(head, 10);
    state.corrupted = hash.get("corrupted") || "";
    state.answer = hash.get("answer") || "";
    state.wrong = hash.get("wrong") || "";
    state.patchAnswer = hash.get("patch_answer") || "";
    state.patchWrong = hash.get("patch_wrong") || "";
  }

  function writeHash() {
    const hash = new URLSearchParams();
    hash.set("model", state.model);
    if (state.prompt) hash.set("prompt", state.prompt);
    hash.set("layer", String(state.layer));
    if (state.head !== null) hash.set("head", String(state.head));
    if (state.corrupted) hash.set("corrupted", state.corrupted);
    if (state.answer) hash.set("answer", state.answer);
    if (state.wrong) hash.set("wrong", state.wrong);
    if (state.patchAnswer) hash.set("patch_answer", state.patchAnswer);
    if (state.patchWrong) hash.set("patch_wrong", state.patchWrong);
    history.replaceState(null, "", location.pathname + location.search + "#" + hash.toString());
  }

  function currentModel() {
    return models.find((m) => m.name === state.model) || models[0];
  }

  // ------------------------------------------------------------------ models
  function fillModels() {
    const select = $("model");
    select.replaceChildren(...models.map((m) => el("option", m.name)));
    if (!models.some((m) => m.name === state.model)) state.model = models[0].name;
    select.value = state.model;
    fillLayers();
  }

  function fillLayers() {
    const model = currentModel();
    $("model-shape").textContent =
      `${model.n_layers} layers, ${model.n_heads} head${model.n_heads === 1 ? "" : "s"} per layer, ` +
      `d_model ${model.d_model}${model.attn_only ? ", attention only" : ""}, ` +
      `up to ${model.max_tokens} tokens`;
    const select = $("layer");
    const layers = Array.from({ length: model.n_layers }, (_, i) => el("option", String(i)));
    layers.forEach((option, i) => (option.value = String(i)));
    select.replaceChildren(...layers);
    if (state.layer >= model.n_layers) state.layer = 0;
    if (state.head !== null && state.head >= model.n_heads) state.head = null;
    select.value = String(state.layer);
    $("sae-section").hidden = !model.has_sae;
  }

  // ------------------------------------------------------------------ tokens
  function renderTokens(data) {
    $("tokens").replaceChildren(
      ...data.tokens.map((token, i) => {
        const span = el("span", visible(token), "token");
        span.appendChild(el("sub", String(i)));
        return span;
      }),
    );
    $("predictions").tBodies[0].replaceChildren(
      ...data.top_predictions.map((p) => {
        const row = el("tr");
        row.append(el("td", visible(p.token), "text"), el("td", String(p.token_id)));
        row.append(el("td", p.prob.toFixed(4)));
        return row;
      }),
    );
  }

  // ------------------------------------------------------------------ attention
  function drawThumbnail(canvas, pattern) {
    const n = pattern.length;
    canvas.width = n;
    canvas.height = n;
    const context = canvas.getContext("2d");
    const image = context.createImageData(n, n);
    for (let q = 0; q < n; q++) {
      for (let k = 0; k < n; k++) {
        const v = Math.max(0, Math.min(1, pattern[q][k]));
        const offset = 4 * (q * n + k);
        image.data[offset] = Math.round(255 * (1 - v * 0.88));
        image.data[offset + 1] = Math.round(255 * (1 - v * 0.56));
        image.data[offset + 2] = Math.round(255 * (1 - v * 0.18));
        image.data[offset + 3] = 255;
      }
    }
    context.putImageData(image, 0, 0);
  }

  async function loadLayer(gen) {
    const data = await api("attention", { model: state.model, prompt: state.prompt, layer: state.layer });
    if (gen !== generation) return;
    layerData = data;
    $("head-grid").replaceChildren(
      ...data.patterns.map((pattern, head) => {
        const cell = el("div", undefined, "head");
        cell.dataset.head = String(head);
        const canvas = el("canvas");
        drawThumbnail(canvas, pattern);
        cell.append(canvas, el("span", `L${data.layer}H${head}`));
        cell.addEventListener("click", () => selectHead(head));
        return cell;
      }),
    );
    if (state.head !== null && state.head < data.patterns.length) selectHead(state.head);
    else {
      $("pattern").replaceChildren();
      $("pattern-title").textContent = "";
    }
  }

  function selectHead(head) {
    state.head = head;
    writeHash();
    for (const cell of $("head-grid").children) {
      cell.classList.toggle("selected", cell.dataset.head === String(head));
    }
    $("pattern-title").textContent = `L${layerData.layer}H${head} attention pattern`;
    // interp's canvas view (interp/viz/static/attention.js): tokens drawn as canvas text.
    const box = InterpAttention.pattern($("pattern"), layerData.tokens, layerData.patterns[head]);
    box.dataset.headDrawn = String(head);
  }

  // ------------------------------------------------------------------ plots
  async function loadLens(gen) {
    const data = await api("logit_lens", { model: state.model, prompt: state.prompt });
    if (gen !== generation) return;
    const trace = {
      type: "heatmap",
      z: data.top_probs,
      x: positionLabels(data.tokens),
      y: data.stages.map(plotText),
      text: data.top_tokens.map((row) => row.map(plotToken)),
      texttemplate: "%{text}",
      hovertemplate: "%{y} at %{x}: %{text} (%{z:.3f})<extra></extra>",
      zmin: 0,
      zmax: 1,
      colorscale: BLUES,
      colorbar: { title: { text: "top-1 prob" } },
    };
    const height = Math.min(180 + 26 * data.stages.length, 800);
    await plot("logit-lens", [trace], plotLayout("Top prediction at each depth", height, {
      yaxis: { autorange: "reversed", type: "category" },
      xaxis: { type: "category" },
    }));
  }

  async function loadAttribution(gen) {
    const body = { model: state.model, prompt: state.prompt };
    if (state.answer) body.answer = state.answer;
    if (state.wrong) body.wrong_answer = state.wrong;
    const data = await api("attribution", body);
    if (gen !== generation) return;
    const what = data.wrong_answer === null ? `logit of ${JSON.stringify(data.answer)}` :
      `logit of ${JSON.stringify(data.answer)} - logit of ${JSON.stringify(data.wrong_answer)}`;
    $("dla-summary").textContent = `${what} = ${data.logit_diff.toFixed(3)}`;
    const heads = data.heads[0].map((_, h) => "H" + h);
    const z = data.heads.map((row, layer) => (data.mlps ? row.concat([data.mlps[layer]]) : row));
    const bound = symmetricBound(z);
    const trace = {
      type: "heatmap",
      z: z,
      x: data.mlps ? heads.concat(["MLP"]) : heads,
      y: data.heads.map((_, layer) => "L" + layer),
      zmin: -bound,
      zmax: bound,
      colorscale: RDBU,
      text: z.map((row) => row.map((v) => v.toFixed(2))),
      texttemplate: "%{text}",
      hovertemplate: "%{y} %{x}: %{z:.3f}<extra></extra>",
    };
    await plot("dla", [trace], plotLayout("Direct effect by layer and head: " + what,
      Math.min(160 + 36 * data.heads.length, 700), { yaxis: { autorange: "reversed" } }));
  }

  async function loadScores(gen) {
    const data = await api("head_scores", { model: state.model, prompt: state.prompt });
    if (gen !== generation) return;
    const kinds = Object.keys(data.scores);
    // The heads the scores support (as the report's summary): interp.analysis.strongest_heads.
    $("scores-summary").textContent =
      `Strongest heads (named at ${data.threshold} or more; an induction head only after a ` +
      "previous-token head in an earlier layer): " +
      kinds.map((kind) => {
        const best = data.strongest[kind];
        return best ? `${kind} ${best.head} (${best.score.toFixed(2)})` : `${kind}: no head above ${data.threshold}`;
      }).join("; ");
    const traces = kinds.map((kind, i) => {
      const z = data.scores[kind];
      return {
        type: "heatmap",
        z: z,
        x: z[0].map((_, h) => "H" + h),
        y: z.map((_, layer) => "L" + layer),
        xaxis: "x" + (i + 1),
        yaxis: "y" + (i + 1),
        zmin: 0,
        zmax: 1,
        colorscale: BLUES,
        showscale: i === kinds.length - 1,
        text: z.map((row) => row.map((v) => (v === null ? "" : v.toFixed(2)))),
        texttemplate: "%{text}",
        hovertemplate: "%{y}%{x}: %{z:.3f}<extra>" + plotText(kind) + "</extra>",
      };
    });
    const layout = plotLayout("Head scores on this prompt", Math.min(250 + 36 * data.scores[kinds[0]].length, 730), {
      margin: { l: 70, r: 30, t: 90, b: 60 }, // room for the title above the panels' names
      grid: { rows: 1, columns: kinds.length, pattern: "independent" },
      annotations: kinds.map((kind, i) => ({
        text: plotText(kind),
        showarrow: false,
        xref: "x" + (i + 1) + " domain",
        yref: "y" + (i + 1) + " domain",
        x: 0.5,
        y: 1.12,
      })),
    });
    kinds.forEach((_, i) => (layout["yaxis" + (i + 1)] = { autorange: "reversed" }));
    await plot("head-scores", traces, layout);
  }

  // The prompt's tokens; a click lists that token's strongest features, each linking to its
  // page in the feature browser (dataset contexts, steering).
  async function loadSae(gen) {
    const data = await api("sae_features", { model: state.model, prompt: state.prompt });
    if (gen !== generation) return;
    const showToken = (pos) => {
      for (const span of $("sae-features").children) {
        span.classList.toggle("selected", span.dataset.position === String(pos));
      }
      const list = el("div");
      list.append(el("strong", `Strongest features on ${JSON.stringify(visible(data.tokens[pos]))}: `));
      for (const f of data.features[pos].filter((f) => f.activation > 0)) {
        const link = document.createElement("a");
        const hash = new URLSearchParams({ model: state.model, feature: String(f.feature), prompt: state.prompt });
        link.href = "features#" + hash.toString();
        link.textContent = `#${f.feature} ${f.activation.toFixed(2)}`;
        link.className = "feature-link";
        list.append(link);
      }
      $("sae-token-features").replaceChildren(list);
    };
    $("sae-features").replaceChildren(
      ...data.tokens.map((token, pos) => {
        const span = el("span", visible(token), "token");
        span.appendChild(el("sub", String(pos)));
        span.dataset.position = String(pos);
        span.addEventListener("click", () => showToken(pos));
        return span;
      }),
    );
    $("sae-token-features").replaceChildren(el("span", "click a token to see its strongest features", "muted"));
  }

  // ------------------------------------------------------------------ patching
  function renderPatching(result) {
    const gap = result.clean_logit_diff - result.corrupted_logit_diff;
    $("patching-baselines").textContent =
      `logit of ${JSON.stringify(result.answer)} - logit of ${JSON.stringify(result.wrong_answer)}: ` +
      `clean run ${result.clean_logit_diff.toFixed(3)}, corrupted run ` +
      `${result.corrupted_logit_diff.toFixed(3)} (gap ${gap.toFixed(3)})`;
    $("patching-warning").textContent = result.warning || "";
    $("patching-warning").hidden = !result.warning;
    const resid = {
      type: "heatmap",
      z: result.resid_pre,
      x: positionLabels(result.tokens),
      y: result.resid_pre.map((_, layer) => "L" + layer),
      colorscale: RDBU,
      zmin: -symmetricBound(result.resid_pre),
      zmax: symmetricBound(result.resid_pre),
      hovertemplate: "%{y} at %{x}: %{z:.3f}<extra></extra>",
    };
    const metric = `${plotText(JSON.stringify(result.answer))} - ${plotText(JSON.stringify(result.wrong_answer))}`;
    const scale = result.normalised ? " (0 = corrupted, 1 = clean)" : "";
    plot("patching-resid", [resid], plotLayout(
      `Patching resid_pre by layer and position: logit diff ${metric}${scale}`,
      Math.min(200 + 30 * result.resid_pre.length, 700),
      { yaxis: { autorange: "reversed" }, xaxis: { type: "category" } }));
    const heads = {
      type: "heatmap",
      z: result.heads,
      x: result.heads[0].map((_, h) => "H" + h),
      y: result.heads.map((_, layer) => "L" + layer),
      colorscale: RDBU,
      zmin: -symmetricBound(result.heads),
      zmax: symmetricBound(result.heads),
      hovertemplate: "%{y}%{x}: %{z:.3f}<extra></extra>",
    };
    plot("patching-heads", [heads], plotLayout(
      `Patching head outputs (all positions): ${metric}${scale}`,
      Math.min(200 + 30 * result.heads.length, 700), { yaxis: { autorange: "reversed" } }));
  }

  // Start patching the prompt of generation `gen`; its progress, result or error stay in the
  // patching panel, and a newer prompt or model (or another start) stops it.
  async function startPatching(gen) {
    if (job) await cancelPatching(false);
    clearPanel("patching");
    if (!state.prompt || !state.corrupted) return;
    const body = { model: state.model, prompt: state.prompt, corrupted: state.corrupted };
    if (state.patchAnswer) body.answer = state.patchAnswer;
    if (state.patchWrong) body.wrong_answer = state.patchWrong;
    const status = await api("patching", body);
    if (gen !== generation) {
      await api(`jobs/${status.id}`, undefined, "DELETE");
      return;
    }
    const suffix = InterpApi.TOKEN ? "?token=" + encodeURIComponent(InterpApi.TOKEN) : "";
    const source = new EventSource(`api/jobs/${status.id}/events${suffix}`);
    job = { id: status.id, source: source };
    $("cancel").disabled = false;
    $("patching-progress").hidden = false;
    setBusy(1); // the job, until its last message
    const finish = () => {
      source.close();
      job = null;
      $("cancel").disabled = true;
      $("patching-progress").hidden = true;
      setBusy(-1);
    };
    source.onmessage = (event) => {
      if (!job || job.source !== source) return; // a stopped job's last words
      const update = JSON.parse(event.data);
      $("patching-progress").max = update.total;
      $("patching-progress").value = update.done;
      $("patching-state").textContent = `${update.state}: ${update.done} of ${update.total} steps`;
      if (update.state === "running") return;
      finish();
      if (update.state === "done") renderPatching(update.result);
      if (update.state === "error") panelError("patching", update.error);
    };
    source.onerror = () => {
      if (job && job.source === source) {
        finish();
        panelError("patching", "Lost the connection to the patching job.");
      }
    };
  }

  // Stop the running job; `report` says so in the panel (a user's Cancel), else the panel is
  // left to whoever stopped it (a new prompt, model or patching run clears it).
  async function cancelPatching(report) {
    if (!job) return;
    const id = job.id;
    job.source.close();
    job = null;
    setBusy(-1);
    $("cancel").disabled = true;
    $("patching-progress").hidden = true;
    const status = await api(`jobs/${id}`, undefined, "DELETE");
    if (report) $("patching-state").textContent = `cancelled after ${status.done} of ${status.total} steps`;
  }

  // ------------------------------------------------------------------ actions
  // Every panel for the current model and prompt: each is emptied first, then filled by its
  // own request (or shows its own error). A failed prompt leaves every panel empty.
  async function analyse() {
    clearError();
    writeHash();
    markStale();
    const gen = ++generation;
    if (job) await cancelPatching(false);
    Object.keys(PANELS).forEach(clearPanel);
    if (!state.prompt) return;
    try {
      const data = await api("prompt", { model: state.model, prompt: state.prompt });
      if (gen !== generation) return;
      renderTokens(data);
    } catch (error) {
      if (gen === generation) panelError("tokens", error);
      return;
    }
    const parts = [
      inPanel("attention", gen, loadLayer),
      inPanel("lens", gen, loadLens),
      inPanel("dla", gen, loadAttribution),
      inPanel("scores", gen, loadScores),
    ];
    if (currentModel().has_sae) parts.push(inPanel("sae", gen, loadSae));
    if (state.corrupted) parts.push(inPanel("patching", gen, startPatching));
    await Promise.all(parts);
  }

  function run(action) {
    return (event) => {
      if (event) event.preventDefault();
      action().catch(showError);
    };
  }

  // What is drawn no longer matches what is typed: the prompt (every panel), the DLA answers
  // (its panel) or the patching inputs (its panel, once it shows a run). Dimmed until rerun.
  function markStale() {
    const value = (id) => ($(id).value.trim() ? $(id).value : "");
    const promptStale = $("prompt").value !== state.prompt;
    document.querySelector("main").classList.toggle("stale", promptStale);
    $("stale-note").hidden = !promptStale;
    const dlaStale = value("answer") !== state.answer || value("wrong-answer") !== state.wrong;
    $("dla-section").classList.toggle("stale", !promptStale && dlaStale);
    const patchingStale = Boolean(state.corrupted) && ($("corrupted").value !== state.corrupted ||
      value("patch-answer") !== state.patchAnswer || value("patch-wrong") !== state.patchWrong);
    $("patching-section").classList.toggle("stale", !promptStale && patchingStale);
  }

  function submitPrompt() {
    return run(async () => {
      if (state.prompt !== $("prompt").value) {
        // Another prompt: a corrupted one written for the old prompt waits for "Patch".
        state.corrupted = "";
      }
      state.prompt = $("prompt").value;
      await analyse();
    });
  }

  // A new model: its example prompts in the boxes, answers (another vocabulary's) cleared.
  function prefillExample() {
    const model = currentModel();
    state.prompt = model.example_prompt;
    state.corrupted = "";
    state.answer = state.wrong = state.patchAnswer = state.patchWrong = "";
    $("prompt").value = model.example_prompt;
    $("corrupted").value = model.example_corrupted;
    for (const id of ["answer", "wrong-answer", "patch-answer", "patch-wrong"]) $(id).value = "";
  }

  function bind() {
    for (const id of ["prompt", "answer", "wrong-answer", "corrupted", "patch-answer", "patch-wrong"]) {
      $(id).addEventListener("input", markStale);
    }
    $("prompt-form").addEventListener("submit", submitPrompt());
    $("prompt").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) submitPrompt()(event);
    });
    $("model").addEventListener("change", run(async () => {
      state.model = $("model").value;
      fillLayers();
      prefillExample();
      await analyse();
    }));
    $("layer").addEventListener("change", run(async () => {
      state.layer = parseInt($("layer").value, 10);
      writeHash();
      if (!state.prompt) return;
      clearPanel("attention");
      await inPanel("attention", generation, loadLayer);
    }));
    $("dla-form").addEventListener("submit", run(async () => {
      state.answer = $("answer").value.trim() ? $("answer").value : "";
      state.wrong = $("wrong-answer").value.trim() ? $("wrong-answer").value : "";
      writeHash();
      markStale();
      clearPanel("dla");
      if (state.prompt) await inPanel("dla", generation, loadAttribution);
    }));
    $("patching-form").addEventListener("submit", run(async () => {
      state.corrupted = $("corrupted").value;
      state.patchAnswer = $("patch-answer").value.trim() ? $("patch-answer").value : "";
      state.patchWrong = $("patch-wrong").value.trim() ? $("patch-wrong").value : "";
      writeHash();
      markStale();
      await inPanel("patching", generation, startPatching);
    }));
    $("cancel").addEventListener("click", run(() => cancelPatching(true)));
  }

  async function start() {
    setBusy(0);
    readHash();
    bind();
    try {
      models = (await api("models")).models;
    } catch (error) {
      showError(error);
      return;
    }
    fillModels();
    if (!state.prompt) prefillExample();
    $("prompt").value = state.prompt;
    if (state.corrupted) $("corrupted").value = state.corrupted;
    $("answer").value = state.answer;
    $("wrong-answer").value = state.wrong;
    $("patch-answer").value = state.patchAnswer;
    $("patch-wrong").value = state.patchWrong;
    await analyse();
    document.body.dataset.ready = "1";
  }

  start().catch(showError);
})();
