/* The attribution-graph viewer: draws a graph in Neuronpedia's JSON (circuit-tracer's
 * create_graph_files) as SVG, with no network and no library.
 *
 * Every div.gv-root holding a JSON data element (script.gv-data, type application/json:
 * {"graph": {metadata, qParams, nodes, links}, "extras": {...} or null}) is rendered once.
 * Rows are layers (embeddings at the bottom, logits at the top), columns token positions.
 * Text from the data only ever reaches the page through textContent or SVG text nodes.
 */
(function () {
  "use strict";
  if (window.InterpGraphView) { window.InterpGraphView.renderAll(); return; }

  const SVG = "http://www.w3.org/2000/svg";
  const POSITIVE = "#2563eb", NEGATIVE = "#dc2626";
  const ROW_H = 64, SLOT = 15, PER_LINE = 10, MAX_LINES = 4, LEFT = 10, TOP = 28, BOTTOM = 56, LABELS = 48;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    return node;
  }
  function visible(token) {
    return String(token).replace(/ /g, "\u2423").replace(/\r?\n/g, "\u21b5").replace(/\t/g, "\u21e5");
  }
  // a clerp keeps its spaces; line breaks and tabs in it are shown, not obeyed
  function visibleBreaks(text) {
    return String(text).replace(/\r?\n/g, "\u21b5").replace(/\t/g, "\u21e5");
  }
  function fmt(value) {
    if (value === null || value === undefined) return "\u2013";
    const a = Math.abs(value);
    return a !== 0 && (a < 0.001 || a >= 10000) ? value.toExponential(2) : value.toFixed(3);
  }

  /* ---------------------------------------------------------------- the graph model */
  function buildModel(data) {
    const graph = data.graph, extras = data.extras || {};
    const tokens = (graph.metadata && graph.metadata.prompt_tokens) || [];
    const nodes = graph.nodes.map((n) => Object.assign({}, n));
    const byId = {}, byKey = {};
    let nLayers = 0;
    nodes.forEach((n, i) => {
      n.key = "n" + i;  // node ids can repeat: circuit-tracer 0.5.0 names errors "0_{layer}_{pos}"
      byKey[n.key] = n;
      (byId[n.node_id] = byId[n.node_id] || []).push(n);
      if (n.feature_type === "logit") nLayers = Math.max(nLayers, Number(n.layer) - 1);
      else if (n.layer !== "E") nLayers = Math.max(nLayers, Number(n.layer) + 1);
    });
    nodes.forEach((n) => {
      n.row = n.feature_type === "embedding" ? 0 : n.feature_type === "logit" ? nLayers + 1
        : Number(n.layer) + 1;
      n.kind = n.feature_type === "embedding" ? "embedding" : n.feature_type === "logit" ? "logit"
        : n.feature_type === "mlp reconstruction error" ? "error" : "feature";
      n.token = tokens[n.ctx_idx] !== undefined ? tokens[n.ctx_idx] : "";
      n.incoming = []; n.outgoing = [];
    });
    // A shared id (an error's and a feature's, see resolveLinks) is resolved by what an
    // attribution graph allows; what stays ambiguous goes to the feature and is counted.
    const resolved = resolveLinks(graph.links, byId);
    const links = [];
    resolved.links.forEach((link) => {
      links.push(link); link.source.outgoing.push(link); link.target.incoming.push(link);
    });
    const ambiguous = resolved.ambiguous;
    const maxWeight = links.reduce((m, l) => Math.max(m, Math.abs(l.weight)), 0) || 1;
    const q = graph.qParams || {};
    return {
      graph, extras, tokens, nodes, byKey, links,
      nLayers, maxWeight, ambiguous,
      shared: Object.keys(byId).filter((id) => byId[id].length > 1).length,
      fileNodeThreshold: (graph.metadata && graph.metadata.node_threshold) || 1,
      pinned: (q.pinnedIds || []).filter((id) => byId[id]).map((id) => byId[id][0].key),
      clicked: q.clickedId && byId[q.clickedId] ? byId[q.clickedId][0].key : null,
    };
  }

  const RANK = { feature: 0, error: 1, embedding: 2 };  // sources' order in the adjacency matrix
  /* Links [{source, target, weight}] with node objects for ids. circuit-tracer 0.5.0 names the
   * error node of layer l at position p "0_{l}_{p}", the id of feature l of layer 0 there.
   * Error and token nodes have no inputs, so a target is never the error. For a source:
   * create_graph_files lists each target's links by source in graph order (features, then
   * errors, then tokens), so a source after an error of the same target is the error, one
   * before a feature is the feature, and an id met twice for one target is the feature first.
   * Else the source must sit in a row below its target's. */
  function resolveLinks(raw, byId) {
    const out = [];
    let ambiguous = 0, i = 0;
    function candidates(id) { return byId[id] || []; }
    while (i < raw.length) {
      let j = i;
      while (j < raw.length && raw[j].target === raw[i].target) j++;
      const targets = candidates(raw[i].target).filter((n) => n.kind !== "error" && n.kind !== "embedding");
      const target = targets[0] || candidates(raw[i].target)[0];
      const run = raw.slice(i, j).map((l) => candidates(l.source));
      const ranks = run.map((found) => found.length === 1 ? RANK[found[0].kind] : null);
      const seen = {};
      for (let k = 0; k < run.length; k++) {
        const found = run[k], l = raw[i + k];
        let source = found[0];
        if (found.length > 1 && target) {
          const before = Math.max.apply(null, [-1].concat(ranks.slice(0, k).filter((r) => r !== null)));
          const after = Math.min.apply(null, [9].concat(ranks.slice(k + 1).filter((r) => r !== null)));
          const byKind = (kind) => found.filter((n) => n.kind === kind)[0];
          const below = found.filter((n) => n.row < target.row);
          if (before >= RANK.error || seen[l.source]) source = byKind("error") || source;
          else if (after <= RANK.feature) source = byKind("feature") || source;
          else if (below.length === 1) source = below[0];
          else { source = byKind("feature") || source; ambiguous++; }
          ranks[k] = RANK[source.kind];
          seen[l.source] = true;
        }
        if (source && target) out.push({ source, target, weight: Number(l.weight) });
      }
      i = j;
    }
    return { links: out, ambiguous };
  }

  function nodeTitle(n) {
    if (n.kind === "embedding") return "Token " + JSON.stringify(n.token) + " at position " + n.ctx_idx;
    if (n.kind === "logit") return n.clerp ? visibleBreaks(n.clerp) : "Logit " + n.feature;
    if (n.kind === "error") return "MLP error, layer " + n.layer + ", position " + n.ctx_idx;
    return (n.clerp ? visibleBreaks(n.clerp) + " \u2014 " : "") + "Feature " + featureIndex(n) + " of layer " +
      n.layer + " at position " + n.ctx_idx;
  }
  /* a short name for lists: "L1 #14 @24", "error L0 @3", "token "cat" @2", "logit "dog"" */
  function shortLabel(n) {
    if (n.kind === "feature") return "L" + n.layer + " #" + featureIndex(n) + " @" + n.ctx_idx + " " + visible(n.token) + (n.clerp ? " \u2014 " + visibleBreaks(n.clerp) : "");
    if (n.kind === "error") return "error L" + n.layer + " @" + n.ctx_idx + " " + visible(n.token);
    if (n.kind === "embedding") return "token " + visible(n.token) + " @" + n.ctx_idx;
    return n.clerp ? visibleBreaks(n.clerp) : "logit " + n.feature;
  }
  function featureIndex(n) { return Number(String(n.node_id).split("_")[1]); }
  /* What a node is, in words. The JSON's feature_type is circuit-tracer's: "cross layer
     transcoder" for every transcoder's features, so the kind comes from the extras
     ("per-layer" or "cross-layer", known when the viewer was made with the model). */
  function typeLabel(n, extras) {
    if (n.kind === "embedding") return "token embedding";
    if (n.kind === "logit") return "logit (the model's output)";
    if (n.kind === "error") return "MLP reconstruction error";
    const kind = extras && extras.transcoder;
    if (kind === "per-layer" || kind === "cross-layer") return kind + " transcoder feature";
    return "transcoder feature";
  }
  /* Where a node sits: the JSON puts embeddings at layer "E" and logits at n_layers + 1,
     a layer the model does not have. */
  function layerLabel(n, nLayers) {
    if (n.kind === "embedding") return "embeddings (input)";
    if (n.kind === "logit") return "output (after layer " + (nLayers - 1) + ")";
    return String(n.layer);
  }

  /* --------------------------------------------------------- pruning in the browser */
  /* prune_graph's rule on the file's graph: feature and error nodes whose cumulative
   * influence (the file's "influence") is above nodeThreshold go; then edges are scored by
   * their share of the influence on the logits (row-normalised |weight| times the target's
   * influence) and the strongest holding edgeThreshold of the total are kept; features and
   * errors that lose every target (features: or every source) go. Pinned nodes always stay.
   * At the file's node threshold and edge threshold 1 the file is shown as it is. */
  function prune(model, nodeThreshold, edgeThreshold) {
    const keep = {}, pinned = {};
    model.pinned.forEach((id) => { pinned[id] = true; });
    // as prune_graph's threshold: the nodes up to the first whose cumulative score reaches it
    let reach = Infinity;
    model.nodes.forEach((n) => {
      if (typeof n.influence === "number" && n.influence >= nodeThreshold) reach = Math.min(reach, n.influence);
    });
    model.nodes.forEach((n) => {
      keep[n.key] = n.kind === "embedding" || n.kind === "logit" || pinned[n.key] ||
        typeof n.influence !== "number" || n.influence <= reach;
    });
    const live = model.links.filter((l) => keep[l.source.key] && keep[l.target.key]);
    const rowSum = {};
    live.forEach((l) => { rowSum[l.target.key] = (rowSum[l.target.key] || 0) + Math.abs(l.weight); });
    const norm = live.map((l) => Math.abs(l.weight) / Math.max(rowSum[l.target.key], 1e-10));
    const weight = {};
    model.nodes.forEach((n) => { weight[n.key] = n.kind === "logit" ? (n.token_prob || 0) : 0; });
    // influence = w A + w A^2 + ... (the graph is acyclic: at most one step per row)
    const influence = {};
    let current = Object.assign({}, weight);
    for (let step = 0; step <= model.nLayers + 2; step++) {
      const next = {};
      let any = false;
      live.forEach((l, i) => {
        const c = current[l.target.key];
        if (c) { next[l.source.key] = (next[l.source.key] || 0) + c * norm[i]; any = true; }
      });
      for (const id in next) influence[id] = (influence[id] || 0) + next[id];
      if (!any) break;
      current = next;
    }
    const scores = live.map((l, i) => norm[i] * ((influence[l.target.key] || 0) + weight[l.target.key]));
    const ordered = scores.slice().sort((a, b) => b - a);
    const total = ordered.reduce((a, b) => a + b, 0);
    let cut = -Infinity;
    if (total > 0 && edgeThreshold < 1) {
      let sum = 0;
      cut = ordered[ordered.length - 1];
      for (let k = 0; k < ordered.length; k++) {
        sum += ordered[k];
        if (sum / total >= edgeThreshold - 1e-12) { cut = ordered[k]; break; }
      }
    }
    let edges = live.filter((l, i) => scores[i] >= cut || (pinned[l.source.key] && pinned[l.target.key]));
    let changed = true;
    while (changed) {
      changed = false;
      const hasTarget = {}, hasSource = {};
      edges.forEach((l) => { hasTarget[l.source.key] = true; hasSource[l.target.key] = true; });
      model.nodes.forEach((n) => {
        const id = n.key;
        if (!keep[id] || pinned[id] || n.kind === "embedding" || n.kind === "logit") return;
        // (only nodes that lost their edges here: what the file holds stays at its thresholds)
        const lost = (n.outgoing.length && !hasTarget[id]) || (n.kind === "feature" && n.incoming.length && !hasSource[id]);
        if (lost) { keep[id] = false; changed = true; }
      });
      edges = edges.filter((l) => keep[l.source.key] && keep[l.target.key]);
    }
    return { keep, edges };
  }

  /* ------------------------------------------------------------------ the layout */
  // nodes a line in a cell: logits on one line, others in at most MAX_LINES lines
  function perLineOf(list) {
    return list[0].kind === "logit" ? list.length : Math.max(PER_LINE, Math.ceil(list.length / MAX_LINES));
  }
  function layout(model) {
    const nPos = Math.max(model.tokens.length, 1 + model.nodes.reduce((m, n) => Math.max(m, n.ctx_idx), 0));
    const cells = {};
    model.nodes.forEach((n) => {
      const key = n.row + ":" + n.ctx_idx;
      (cells[key] = cells[key] || []).push(n);
    });
    const widths = [];
    for (let p = 0; p < nPos; p++) {  // room for the token's label, up to 8 characters
      const label = visible(model.tokens[p] !== undefined ? model.tokens[p] : "");
      widths.push(Math.max(30, 7.5 * Math.min(label.length, 8) + 14));
    }
    let lines = 1;
    for (const key in cells) {
      const list = cells[key], pos = list[0].ctx_idx, slot = list[0].kind === "logit" ? 30 : SLOT;
      list.sort((a, b) => (a.influence === null ? 0 : a.influence) - (b.influence === null ? 0 : b.influence) || (a.token_prob > b.token_prob ? -1 : 1));
      const perLine = perLineOf(list);
      widths[pos] = Math.max(widths[pos], Math.min(list.length, perLine) * slot + 16);
      lines = Math.max(lines, Math.ceil(list.length / perLine));
    }
    const rowH = Math.max(ROW_H, lines * SLOT + 30);
    const x = [LEFT];
    for (let p = 0; p < nPos; p++) x.push(x[p] + widths[p]);
    const nRows = model.nLayers + 2;
    const height = TOP + nRows * rowH + BOTTOM;
    function rowY(row) { return TOP + (nRows - 1 - row) * rowH + rowH / 2; }
    for (const key in cells) {
      const list = cells[key];
      const kind = list[0].kind;
      const slot = kind === "logit" ? 30 : SLOT;
      const perLine = perLineOf(list);
      const col = list[0].ctx_idx, centre = (x[col] + x[col + 1]) / 2;
      const nLines = Math.ceil(list.length / perLine);
      list.forEach((n, i) => {
        const line = Math.floor(i / perLine), inLine = Math.min(perLine, list.length - line * perLine);
        n.x = centre + ((i % perLine) - (inLine - 1) / 2) * slot;
        n.y = rowY(n.row) + (line - (nLines - 1) / 2) * SLOT - (kind === "logit" ? 6 : 0);
      });
    }
    return { nPos, x, width: x[nPos] + 16, height, rowY, rowH, nRows };
  }

  /* ------------------------------------------------------------------ the view */
  // the details panel's table of a node's strongest shown edges (to or from it)
  function edgeTable(title, links, other, self) {
    const box = el("div", "gv-edge-list");
    box.appendChild(el("h4", null, title));
    if (!links.length) { box.appendChild(el("p", "gv-note", "none shown at these thresholds")); return box; }
    const table = el("table");
    links.slice().sort((a, b) => Math.abs(b.weight) - Math.abs(a.weight)).slice(0, 10).forEach((l) => {
      const n = l[other], tr = el("tr");
      const name = el("td"), link = el("a", null, shortLabel(n));
      link.href = "#"; link.addEventListener("click", (e) => { e.preventDefault(); self.selected = null; self.select(n.key); });
      name.appendChild(link);
      const w = el("td", l.weight >= 0 ? "gv-pos" : "gv-neg", (l.weight >= 0 ? "+" : "") + fmt(l.weight));
      tr.appendChild(w); tr.appendChild(name); table.appendChild(tr);
    });
    box.appendChild(table);
    return box;
  }

  class GraphView {
    constructor(root, data) {
      this.root = root;
      this.model = buildModel(data);
      this.selected = this.model.clicked;
      this.build();
      this.update();
      this.canvas.scrollLeft = this.canvas.scrollWidth;  // the logits, at the last position
    }

    build() {
      const self = this, model = this.model, meta = model.graph.metadata || {};
      const root = this.root;
      while (root.firstChild && !(root.firstChild.classList && root.firstChild.classList.contains("gv-data"))) root.removeChild(root.firstChild);
      const header = el("div", "gv-header");
      header.appendChild(el("div", "gv-prompt", meta.prompt !== undefined ? visible(meta.prompt) : ""));
      const info = el("div", "gv-info");
      info.appendChild(el("span", null, (meta.slug ? meta.slug + " \u00b7 " : "") + (meta.scan ? "transcoders " + meta.scan + " \u00b7 " : "") +
        "pruned at node threshold " + model.fileNodeThreshold + " in the file"));
      if (model.shared) {
        info.appendChild(el("div", "gv-warning", model.shared + " node id(s) belong to two nodes (circuit-tracer 0.5.0 names " +
          "error nodes \"0_{layer}_{pos}\", which can equal a feature's \"{layer}_{feature}_{pos}\"); " +
          model.ambiguous + " edge(s) from such an id could not be told apart and are drawn from the feature."));
      }
      header.appendChild(info);
      const controls = el("div", "gv-controls");
      function slider(name, label, min, max, value) {
        const wrap = el("label", "gv-slider");
        wrap.appendChild(el("span", null, label));
        const input = el("input");
        input.type = "range"; input.name = name; input.min = min; input.max = max; input.step = 0.01;
        input.value = value;
        const shown = el("output", null, Number(value).toFixed(2));
        input.addEventListener("input", () => {
          shown.textContent = Number(input.value).toFixed(2);
          self.scheduleUpdate();
        });
        wrap.appendChild(input); wrap.appendChild(shown);
        controls.appendChild(wrap);
        return input;
      }
      this.nodeSlider = slider("node-threshold", "node threshold", 0.05, Math.max(model.fileNodeThreshold, 0.05), model.fileNodeThreshold);
      this.edgeSlider = slider("edge-threshold", "edge threshold", 0.05, 1, 1);
      this.counts = el("span", "gv-counts");
      controls.appendChild(this.counts);
      header.appendChild(controls);
      root.insertBefore(header, root.firstChild);

      const body = el("div", "gv-body");
      const area = el("div", "gv-area"), canvas = el("div", "gv-canvas");
      const geo = this.geo = layout(model);
      // the rows' names stay in view while the positions scroll sideways
      const names = svg("svg", { width: LABELS, height: geo.height, class: "gv-rownames" });
      const s = this.svg = svg("svg", { width: geo.width, height: geo.height, viewBox: "0 0 " + geo.width + " " + geo.height, class: "gv-svg" });
      const grid = svg("g", { class: "gv-grid" });
      for (let row = 0; row < geo.nRows; row++) {
        const y = geo.rowY(row);
        grid.appendChild(svg("line", { x1: 0, x2: geo.width, y1: y, y2: y, class: "gv-rowline" }));
        const label = svg("text", { x: 6, y: y + 4, class: "gv-rowlabel" });
        label.textContent = row === 0 ? "Emb" : row === geo.nRows - 1 ? "Logit" : "L" + (row - 1);
        names.appendChild(label);
      }
      for (let p = 0; p < geo.nPos; p++) {
        const cx = (geo.x[p] + geo.x[p + 1]) / 2;
        if (p > 0) grid.appendChild(svg("line", { x1: geo.x[p], x2: geo.x[p], y1: TOP - 8, y2: geo.height - BOTTOM + 6, class: "gv-colline" }));
        const tok = svg("text", { x: cx, y: geo.height - BOTTOM + 24, class: "gv-token", "text-anchor": "middle" });
        const full = visible(model.tokens[p] !== undefined ? model.tokens[p] : "");
        const maxChars = Math.max(3, Math.floor((geo.x[p + 1] - geo.x[p]) / 7.5));
        tok.textContent = full.length > maxChars ? full.slice(0, maxChars - 1) + "\u2026" : full;
        const labelGroup = svg("g", {}), tip = svg("title", {});
        tip.textContent = full + " (position " + p + ")";
        labelGroup.appendChild(tip); labelGroup.appendChild(tok);
        grid.appendChild(labelGroup);
        const idx = svg("text", { x: cx, y: geo.height - BOTTOM + 40, class: "gv-posidx", "text-anchor": "middle" });
        idx.textContent = String(p);
        grid.appendChild(idx);
      }
      s.appendChild(grid);
      this.edgeLayer = svg("g", { class: "gv-edges" });
      s.appendChild(this.edgeLayer);
      const nodeLayer = svg("g", { class: "gv-nodes" });
      model.nodes.forEach((n) => {
        const g = svg("g", { class: "gv-node gv-" + n.kind, "data-node-id": n.node_id, transform: "translate(" + n.x + "," + n.y + ")" });
        if (n.kind === "feature") g.appendChild(svg("circle", { r: 5.5 }));
        else if (n.kind === "error") g.appendChild(svg("rect", { x: -5, y: -5, width: 10, height: 10 }));
        else if (n.kind === "embedding") g.appendChild(svg("rect", { x: -7, y: -7, width: 14, height: 14, rx: 2 }));
        else {
          g.appendChild(svg("rect", { x: -6, y: -6, width: 12, height: 12, rx: 6 }));
          const text = svg("text", { y: -10, "text-anchor": "middle", class: "gv-logit-label" });
          const m = /^Output "([\s\S]*)" \(p=/.exec(n.clerp || "");
          const word = visible(m ? m[1] : String(n.feature));
          text.textContent = word.length > 5 ? word.slice(0, 4) + "\u2026" : word;
          g.appendChild(text);
        }
        g.appendChild(svg("circle", { r: 9.5, class: "gv-pin-ring" }));
        g.addEventListener("mouseenter", (event) => { self.hover(n, event); });
        g.addEventListener("mousemove", (event) => { self.moveTip(event); });
        g.addEventListener("mouseleave", () => { self.tip.style.display = "none"; });
        g.addEventListener("click", (event) => {
          self.tip.style.display = "none";
          if (event.shiftKey) self.togglePin(n.key); else self.select(n.key);
        });
        n.element = g;
        nodeLayer.appendChild(g);
      });
      s.appendChild(nodeLayer);
      canvas.appendChild(s);
      area.appendChild(names);
      area.appendChild(canvas);
      body.appendChild(area);
      this.canvas = canvas;

      const side = el("div", "gv-side");
      const pinBox = el("div", "gv-pinned");
      pinBox.appendChild(el("h4", null, "Pinned nodes"));
      this.pinList = el("ul", "gv-pin-list");
      pinBox.appendChild(this.pinList);
      pinBox.appendChild(el("p", "gv-note", "Shift+click a node, or use Pin in its details, to pin it; pinned nodes stay through pruning."));
      side.appendChild(pinBox);
      this.details = el("div", "gv-details");
      side.appendChild(this.details);
      body.appendChild(side);
      root.insertBefore(body, header.nextSibling);
      this.tip = el("div", "gv-tip");
      this.tip.style.display = "none";
      root.insertBefore(this.tip, body.nextSibling);
      const legend = el("div", "gv-legend");
      [["gv-lg-feature", "feature"], ["gv-lg-error", "MLP error"], ["gv-lg-embedding", "token"], ["gv-lg-logit", "logit"],
        ["gv-lg-pos", "positive edge"], ["gv-lg-neg", "negative edge"]].forEach((item) => {
        const entry = el("span", "gv-lg"); entry.appendChild(el("i", item[0])); entry.appendChild(document.createTextNode(item[1]));
        legend.appendChild(entry);
      });
      root.insertBefore(legend, body.nextSibling);
    }

    // a slider fires many input events a second: re-prune once a frame (or at once in a page
    // that draws no frames, such as a background tab)
    scheduleUpdate() {
      const self = this;
      if (this.pending) return;
      this.pending = true;
      const run = () => { if (self.pending) { self.pending = false; self.update(); } };
      window.requestAnimationFrame(run);
      window.setTimeout(run, 100);
    }

    update() {
      const model = this.model, self = this;
      const result = this.pruned = prune(model, Number(this.nodeSlider.value), Number(this.edgeSlider.value));
      while (this.edgeLayer.firstChild) this.edgeLayer.removeChild(this.edgeLayer.firstChild);
      const edges = result.edges.slice().sort((a, b) => Math.abs(a.weight) - Math.abs(b.weight));
      edges.forEach((l) => {
        const strength = Math.abs(l.weight) / model.maxWeight;
        const sx = l.source.x, sy = l.source.y, tx = l.target.x, ty = l.target.y, my = (sy + ty) / 2;
        const path = svg("path", {
          d: "M" + sx + "," + sy + " C" + sx + "," + my + " " + tx + "," + my + " " + tx + "," + ty,
          class: "gv-edge", stroke: l.weight >= 0 ? POSITIVE : NEGATIVE,
          "stroke-width": (0.4 + 3.6 * Math.sqrt(strength)).toFixed(2),
          "stroke-opacity": (0.1 + 0.7 * strength).toFixed(2),
          "data-source": l.source.node_id, "data-target": l.target.node_id,
        });
        l.element = path;
        self.edgeLayer.appendChild(path);
      });
      let shown = 0;
      model.nodes.forEach((n) => {
        const on = !!result.keep[n.key];
        n.element.classList.toggle("gv-hidden", !on);
        n.element.classList.toggle("gv-is-pinned", model.pinned.indexOf(n.key) >= 0);
        if (on) shown++;
      });
      this.counts.textContent = shown + " of " + model.nodes.length + " nodes \u00b7 " + edges.length + " of " + model.links.length + " edges";
      this.renderPins();
      this.highlight();
      this.renderDetails();
    }

    highlight() {
      const id = this.selected;
      this.root.classList.toggle("gv-has-selection", !!id);
      (this.pruned ? this.pruned.edges : []).forEach((l) => {
        l.element.classList.toggle("gv-edge-on", l.source.key === id || l.target.key === id);
      });
      this.model.nodes.forEach((n) => { n.element.classList.toggle("gv-selected", n.key === id); });
    }

    hover(n, event) {
      const tip = this.tip;
      while (tip.firstChild) tip.removeChild(tip.firstChild);
      tip.appendChild(el("div", "gv-tip-title", nodeTitle(n)));
      const nLayers = this.model.nLayers;
      const rows = [["node", n.node_id], ["type", typeLabel(n, this.model.extras)], ["layer", layerLabel(n, nLayers)], ["position", n.ctx_idx + " " + visible(n.token)]];
      if (n.kind === "feature") rows.push(["feature", String(featureIndex(n))]);
      if (n.activation !== null && n.activation !== undefined) rows.push(["activation", fmt(n.activation)]);
      if (n.influence !== null && n.influence !== undefined) rows.push(["influence", fmt(n.influence)]);
      if (n.kind === "logit") rows.push(["probability", fmt(n.token_prob)]);
      const table = el("table");
      rows.forEach((r) => {
        const tr = el("tr"); tr.appendChild(el("th", null, r[0])); tr.appendChild(el("td", null, String(r[1]))); table.appendChild(tr);
      });
      tip.appendChild(table);
      const extra = this.extraOf(n);
      if (extra && extra.contexts && extra.contexts.length) {  // the strongest context, peak marked
        const c = extra.contexts[0], line = el("div", "gv-tip-context");
        c.tokens.forEach((t, i) => { line.appendChild(el(i === c.index ? "b" : "span", null, visible(t))); });
        tip.appendChild(el("div", "gv-tip-label", "top context (" + fmt(c.value) + ")"));
        tip.appendChild(line);
      }
      tip.style.display = "block";
      this.moveTip(event);
    }

    moveTip(event) {
      const box = this.root.getBoundingClientRect();
      this.tip.style.left = (event.clientX - box.left + 14) + "px";
      this.tip.style.top = (event.clientY - box.top + 14) + "px";
    }

    select(id) {
      this.selected = this.selected === id ? null : id;
      this.highlight();
      this.renderDetails();
    }

    togglePin(id) {
      const pins = this.model.pinned, i = pins.indexOf(id);
      if (i >= 0) pins.splice(i, 1); else pins.push(id);
      this.update();
    }

    renderPins() {
      const self = this, list = this.pinList;
      while (list.firstChild) list.removeChild(list.firstChild);
      if (!this.model.pinned.length) list.appendChild(el("li", "gv-note", "none"));
      this.model.pinned.forEach((id) => {
        const n = self.model.byKey[id], li = el("li");
        const link = el("a", "gv-pin-name", shortLabel(n));
        link.href = "#"; link.addEventListener("click", (e) => { e.preventDefault(); self.selected = null; self.select(id); });
        const remove = el("button", "gv-unpin", "\u00d7"); remove.title = "unpin"; remove.type = "button";
        remove.addEventListener("click", () => { self.togglePin(id); });
        li.appendChild(link); li.appendChild(remove); list.appendChild(li);
      });
    }

    renderDetails() {
      const self = this, box = this.details, model = this.model;
      while (box.firstChild) box.removeChild(box.firstChild);
      const n = this.selected ? model.byKey[this.selected] : null;
      if (!n) { box.appendChild(el("p", "gv-note", "Hover a node for its details; click one to see its strongest edges and logit effects.")); return; }
      box.appendChild(el("h3", "gv-detail-title", nodeTitle(n)));
      const pin = el("button", "gv-pin", model.pinned.indexOf(n.key) >= 0 ? "Unpin" : "Pin");
      pin.type = "button"; pin.addEventListener("click", () => { self.togglePin(n.key); });
      box.appendChild(pin);
      const facts = el("table", "gv-facts");
      const rows = [["node", n.node_id], ["type", typeLabel(n, model.extras)], ["layer", layerLabel(n, model.nLayers)], ["position", n.ctx_idx + " (" + visible(n.token) + ")"]];
      if (n.kind === "feature") rows.push(["feature", String(featureIndex(n))]);
      rows.push(["activation", fmt(n.activation)], ["influence", fmt(n.influence)]);
      if (n.clerp) rows.push(["clerp", visibleBreaks(n.clerp)]);
      rows.forEach((r) => {
        const tr = el("tr"); tr.appendChild(el("th", null, r[0])); tr.appendChild(el("td", null, String(r[1]))); facts.appendChild(tr);
      });
      box.appendChild(facts);
      const shown = this.pruned.edges;
      const incoming = shown.filter((l) => l.target === n);
      const outgoing = shown.filter((l) => l.source === n);
      box.appendChild(edgeTable("Strongest inputs", incoming, "source", this));
      box.appendChild(edgeTable("Strongest outputs", outgoing.filter((l) => l.target.kind !== "logit"), "target", this));
      if (n.kind !== "logit") {
        box.appendChild(edgeTable("Direct effects on the logits (graph edges)", n.outgoing.filter((l) => l.target.kind === "logit"), "target", this));
      }
      const extra = this.extraOf(n);
      if (extra) this.renderExtra(box, extra);
    }

    extraOf(n) {
      const features = this.model.extras.features;
      return n.kind === "feature" && features ? features[n.layer + "_" + featureIndex(n)] || null : null;
    }

    renderExtra(box, extra) {
      const tokens = this.model.tokens;
      if (extra.activations && extra.activations.length) {
        box.appendChild(el("h4", null, "Activation on the prompt"));
        const peak = extra.activations.reduce((m, a) => Math.max(m, a[1]), 0) || 1;
        const values = {};
        extra.activations.forEach((a) => { values[a[0]] = a[1]; });
        const line = el("div", "gv-context");
        tokens.forEach((t, p) => {
          const span = el("span", null, visible(t));
          const v = values[p] || 0;
          span.style.background = "rgba(255, 120, 0, " + Math.max(0, Math.min(1, v / peak)).toFixed(3) + ")";
          span.title = "position " + p + ": " + fmt(v);
          line.appendChild(span);
        });
        box.appendChild(line);
      }
      const contexts = extra.contexts || [];
      if (contexts.length) box.appendChild(el("h4", null, "Top contexts"));
      contexts.forEach((c) => {
        const line = el("div", "gv-context");
        const peak = c.acts.reduce((m, a) => Math.max(m, a), 0) || 1;
        line.appendChild(el("span", "gv-ctx-value", fmt(peak)));
        c.tokens.forEach((t, i) => {
          const span = el("span", i === c.index ? "gv-top" : null, visible(t));
          span.style.background = "rgba(255, 120, 0, " + Math.max(0, Math.min(1, c.acts[i] / peak)).toFixed(3) + ")";
          line.appendChild(span);
        });
        box.appendChild(line);
      });
      if (extra.promoted || extra.suppressed) {
        box.appendChild(el("h4", null, "Decoder logit weights"));
        const table = el("table", "gv-logits");
        const head = el("tr"); head.appendChild(el("th", null, "promotes")); head.appendChild(el("th")); head.appendChild(el("th", null, "suppresses")); head.appendChild(el("th"));
        table.appendChild(head);
        const up = extra.promoted || [], down = extra.suppressed || [];
        for (let i = 0; i < Math.max(up.length, down.length); i++) {
          const tr = el("tr");
          tr.appendChild(el("td", "gv-tok", up[i] ? visible(up[i][0]) : ""));
          tr.appendChild(el("td", "gv-pos", up[i] ? "+" + fmt(up[i][1]) : ""));
          tr.appendChild(el("td", "gv-tok", down[i] ? visible(down[i][0]) : ""));
          tr.appendChild(el("td", "gv-neg", down[i] ? fmt(down[i][1]) : ""));
          table.appendChild(tr);
        }
        box.appendChild(table);
      }
    }
  }

  function readData(root) {
    const holder = root.querySelector("script.gv-data");
    return holder ? JSON.parse(holder.textContent) : null;
  }

  function renderAll() {
    const roots = document.querySelectorAll("div.gv-root:not([data-gv-rendered])");
    Array.prototype.forEach.call(roots, (root) => {
      const data = readData(root);
      if (!data) return;
      root.setAttribute("data-gv-rendered", "1");
      root.gvView = new GraphView(root, data);
    });
  }

  /* A page with a file input (input.gv-file) and an empty div.gv-root
   * opens a graph JSON from disk (read in the browser; nothing is sent anywhere). */
  function bindFilePickers() {
    Array.prototype.forEach.call(document.querySelectorAll("input.gv-file"), (input) => {
      if (input.gvBound) return;
      input.gvBound = true;
      input.addEventListener("change", () => {
        const file = input.files && input.files[0], target = document.getElementById(input.getAttribute("data-target"));
        if (!file || !target) return;
        const reader = new FileReader();
        reader.onload = () => {
          const status = document.getElementById(input.getAttribute("data-status"));
          try {
            const parsed = JSON.parse(String(reader.result));
            const data = parsed.graph ? parsed : { graph: parsed, extras: null };
            if (!data.graph.nodes || !data.graph.links) throw new Error("no nodes and links: not a graph JSON from create_graph_files");
            while (target.firstChild) target.removeChild(target.firstChild);
            target.removeAttribute("data-gv-rendered");
            target.gvView = new GraphView(target, data);
            target.setAttribute("data-gv-rendered", "1");
            if (status) status.textContent = file.name;
          } catch (error) {
            if (status) status.textContent = file.name + ": " + error.message;
          }
        };
        reader.readAsText(file);
      });
    });
  }

  window.InterpGraphView = { renderAll, prune, buildModel };
  function start() { renderAll(); bindFilePickers(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
