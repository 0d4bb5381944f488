/* The attribution-graph viewer: draws a graph in Neuronpedia's JSON (circuit-tracer's
 * create_graph_files) as SVG, with no network and no library.
 *
 * Every div.gv-root holding a JSON data element (script.gv-data, type application/json:
 * {"graph": {metadata, qParams, nodes, links}, "extras": {...} or null}) is rendered once.
 * Rows are layers (embeddings at the bottom, logits at the top), columns token positions
 * (runs of positions with no kept node collapsed; fitted to the canvas, zoomed and panned in x).
 * Optional: qParams.supernodes (Neuronpedia's [[label, node_id, ...]]) and the graph's
 * "attention" (head loadings by link, QK pairs by head; see interp/viz/graph_view.py).
 * Text from the data only ever reaches the page through textContent or SVG text nodes.
 */
(function () {
  "use strict";
  if (window.InterpGraphView) { window.InterpGraphView.renderAll(); return; }

  const SVG = "http://www.w3.org/2000/svg";
  const POSITIVE = "#2563eb", NEGATIVE = "#dc2626";
  // layout (pixels): node spacing, a logit's spacing, most nodes a line, a collapsed run's width,
  // a position's least width, a row's least height, margins, the row names' width
  const SLOT = 13, LOGIT_SLOT = 30, LOGIT_LINE = 26, PER_LINE = 10, GAP_W = 12, MIN_COLUMN = 11, ROW_MIN = 44;
  const LEFT = 6, TOP = 16, BOTTOM = 40, LABELS = 48, MAX_ZOOM = 40;
  // a file with more edges opens at the edge threshold that keeps at most this many
  const FIRST_EDGES = 5000;

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
    const nPos = Math.max(tokens.length, 1 + nodes.reduce((m, n) => Math.max(m, n.ctx_idx), 0));
    return {
      graph, extras, tokens, nodes, byKey, byId, links, nPos,
      nLayers, maxWeight, ambiguous,
      supernodes: readSupernodes(q.supernodes, byId),
      attention: readAttention(graph),
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
    return { keep, edges, ordered, total };
  }

  /* ------------------------------------------------ supernodes and attention (optional) */
  /* Neuronpedia's supernodes (qParams.supernodes): [[label, node_id, ...], ...]; members whose
   * id the graph does not have are dropped, as are groups left empty. */
  function readSupernodes(raw, byId) {
    if (!Array.isArray(raw)) return [];
    return raw.filter((group) => Array.isArray(group) && group.length > 1).map((group) => ({
      label: String(group[0]),
      ids: group.slice(1).map(String).filter((id, i, all) => byId[id] && all.indexOf(id) === i),
    })).filter((group) => group.ids.length);
  }
  /* The graph's optional "attention" (interp.circuits.annotate_attention; Neuronpedia ignores
   * it): head loadings by link ("source|target" ids; a shared id may give two) and QK
   * attributions by "layer:head:query_pos". Absent or malformed: empty. */
  function readAttention(graph) {
    const attention = graph.attention && typeof graph.attention === "object" ? graph.attention : {};
    const loadings = {}, qk = {};
    (Array.isArray(attention.head_loadings) ? attention.head_loadings : []).forEach((entry) => {
      if (!entry || !Array.isArray(entry.heads)) return;
      const key = entry.source + "|" + entry.target;
      (loadings[key] = loadings[key] || []).push(entry);
    });
    (Array.isArray(attention.qk) ? attention.qk : []).forEach((entry) => {
      if (!entry || !Array.isArray(entry.pairs)) return;
      const key = entry.layer + ":" + entry.head + ":" + entry.query_pos;
      (qk[key] = qk[key] || []).push(entry);
    });
    return { loadings, qk, rule: attention.rule || "" };
  }
  // a link's head loadings (the entry whose weight is the link's, when an id pair has two)
  function loadingsOf(model, link) {
    const found = model.attention.loadings[link.source.node_id + "|" + link.target.node_id] || [];
    let best = null;
    found.forEach((entry) => {
      if (!best || Math.abs(entry.weight - link.weight) < Math.abs(best.weight - link.weight)) best = entry;
    });
    return best;
  }
  // the QK entries of one head at one query position (all key positions)
  function qkOf(model, layer, head, queryPos) {
    return model.attention.qk[layer + ":" + head + ":" + queryPos] || [];
  }
  // the QK entries at a query position, strongest score first
  function qkAt(model, queryPos) {
    const out = [];
    for (const key in model.attention.qk) {
      model.attention.qk[key].forEach((entry) => { if (entry.query_pos === queryPos) out.push(entry); });
    }
    return out.sort((a, b) => Math.abs(b.score) - Math.abs(a.score));
  }
  function share(value, total) {
    return total ? (100 * value / total).toFixed(1) + "%" : "\u2013";
  }
  const SUPERNODE_COLOURS = ["#7c3aed", "#0891b2", "#c2410c", "#15803d", "#be185d", "#4d7c0f", "#1d4ed8", "#a16207"];

  /* ------------------------------------------------------------------ the layout */
  /* The drawn columns: a position holding a kept node other than its token, whose token has a
   * kept edge, or with a pinned node is drawn; a run of two or more other positions collapses
   * into one narrow gap column (with collapse false, every position is drawn). */
  function layoutColumns(model, keep, edges, collapse, extra) {
    const live = [];
    for (let p = 0; p < model.nPos; p++) live.push(!collapse);
    if (collapse) {
      model.nodes.forEach((n) => { if (keep[n.key] && n.kind !== "embedding") live[n.ctx_idx] = true; });
      edges.forEach((l) => { live[l.source.ctx_idx] = true; live[l.target.ctx_idx] = true; });
      model.pinned.forEach((key) => { live[model.byKey[key].ctx_idx] = true; });
      (extra || []).forEach((p) => { live[p] = true; });
    }
    const columns = [];
    for (let p = 0; p < model.nPos;) {
      let q = p;
      while (!live[p] && q + 1 < model.nPos && !live[q + 1]) q++;
      columns.push({ from: p, to: q, gap: q > p });
      p = q + 1;
    }
    return columns;
  }
  function labelWidth(token) {
    return Math.max(MIN_COLUMN, 7 * Math.min(visible(token).length, 8) + 4);
  }
  /* World coordinates of the kept nodes: columns as wide as their nodes need, narrowed (down to
   * their token's label) until they fit `available` pixels; a cell's nodes wrap into lines,
   * so a busy position grows its row's height rather than the page's width. Zoom and pan
   * (GraphView.applyView) map world x to the screen; y is drawn as it is. */
  function layout(model, keep, edges, available, collapse, extra) {
    const columns = layoutColumns(model, keep, edges, collapse, extra), nRows = model.nLayers + 2;
    const colOf = [];
    columns.forEach((c, i) => { for (let p = c.from; p <= c.to; p++) colOf[p] = i; });
    const minimum = columns.map((c) => c.gap ? GAP_W : labelWidth(model.tokens[c.from] !== undefined ? model.tokens[c.from] : ""));
    const natural = minimum.slice(), cells = {};
    model.nodes.forEach((n) => {
      if (!keep[n.key] || columns[colOf[n.ctx_idx]].gap) return;
      const key = n.row + ":" + colOf[n.ctx_idx];
      (cells[key] = cells[key] || []).push(n);
    });
    for (const key in cells) {
      const list = cells[key], col = colOf[list[0].ctx_idx], logit = list[0].kind === "logit";
      list.sort((a, b) => (a.influence === null ? 0 : a.influence) - (b.influence === null ? 0 : b.influence) || (a.token_prob > b.token_prob ? -1 : 1));
      const wide = logit ? list.length * LOGIT_SLOT : Math.min(list.length, PER_LINE) * SLOT;
      natural[col] = Math.max(natural[col], wide + 6);
      // a busy position keeps room for a few nodes a line however narrow the others get
      if (list.length > 1) minimum[col] = Math.max(minimum[col], Math.min(list.length, logit ? 2 : 3) * (logit ? LOGIT_SLOT : SLOT) + 4);
    }
    const total = (cap) => natural.reduce((sum, w, i) => sum + Math.max(minimum[i], Math.min(w, cap)), 0);
    // when even the least widths overflow, busy positions may still take up to a quarter of
    // the screen more (the fitted zoom then shrinks every position a little)
    const least = total(0), room = least > available ? least + Math.min(total(Infinity) - least, available / 4) : available;
    let cap = Math.max.apply(null, natural.concat([0]));
    if (total(cap) > room) {  // the widest cap that fits (the minima may not: then zoom out)
      let lo = 0, hi = cap;
      for (let k = 0; k < 40; k++) { const mid = (lo + hi) / 2; if (total(mid) > room) hi = mid; else lo = mid; }
      cap = lo;
    }
    let widths = natural.map((w, i) => Math.max(minimum[i], Math.min(w, cap)));
    const used = widths.reduce((sum, w) => sum + w, 0);  // room to spare: widen (up to 3x)
    if (used < available) widths = widths.map((w) => w * Math.min(3, available / used));
    const x = [LEFT];
    widths.forEach((w, i) => { x.push(x[i] + w); });
    const lines = [], lineH = [];
    for (let row = 0; row < nRows; row++) { lines.push(1); lineH.push(row === nRows - 1 ? LOGIT_LINE : SLOT); }
    const perLine = {};
    for (const key in cells) {
      const list = cells[key], col = colOf[list[0].ctx_idx], slot = list[0].kind === "logit" ? LOGIT_SLOT : SLOT;
      perLine[key] = Math.max(1, Math.floor((widths[col] - 4) / slot));
      lines[list[0].row] = Math.max(lines[list[0].row], Math.ceil(list.length / perLine[key]));
    }
    const rowH = lines.map((k, row) => Math.max(ROW_MIN, k * lineH[row] + 24));
    const rowTop = [];
    let y = TOP;
    for (let row = nRows - 1; row >= 0; row--) { rowTop[row] = y; y += rowH[row]; }
    const height = y + BOTTOM;
    function rowY(row) { return rowTop[row] + rowH[row] / 2; }
    for (const key in cells) {
      const list = cells[key], first = list[0], col = colOf[first.ctx_idx];
      const slot = first.kind === "logit" ? LOGIT_SLOT : SLOT, per = perLine[key];
      const centre = (x[col] + x[col + 1]) / 2, nLines = Math.ceil(list.length / per), step = lineH[first.row];
      list.forEach((n, i) => {
        const line = Math.floor(i / per), inLine = Math.min(per, list.length - line * per);
        n.x = centre + ((i % per) - (inLine - 1) / 2) * slot;
        n.y = rowY(n.row) + (line - (nLines - 1) / 2) * step + (first.kind === "logit" ? 6 : 0);
      });
    }
    return { columns, colOf, x, widths, width: x[x.length - 1] + LEFT, height, rowY, rowTop, rowH, nRows };
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
      const w = el("td", l.weight >= 0 ? "gv-pos" : "gv-neg"), pick = el("a", "gv-edge-pick", (l.weight >= 0 ? "+" : "") + fmt(l.weight));
      pick.href = "#"; pick.title = "this edge's head loadings";
      pick.addEventListener("click", (e) => { e.preventDefault(); self.selectEdge(l); });
      w.appendChild(pick);
      tr.appendChild(w); tr.appendChild(name); table.appendChild(tr);
    });
    box.appendChild(table);
    return box;
  }

  class GraphView {
    constructor(root, data) {
      const started = performance.now();
      this.root = root;
      root.setAttribute("data-gv-state", "rendering");
      this.model = buildModel(data);
      this.selected = this.model.clicked;
      this.selectedEdge = null;
      this.head = null;  // {layer, head, query, key}: the head whose QK pairs are shown
      this.collapse = true;
      this.view = { s: 1, tx: 0 };
      this.matches = [];
      this.build();
      this.update();
      const layoutMs = performance.now() - started;
      root.setAttribute("data-gv-layout-ms", layoutMs.toFixed(1));
      // drawn once the browser has painted a frame after the layout (a page that draws no
      // frames, such as a background tab, says so after 2 s with the layout time alone)
      let done = false;
      const finish = (painted) => {
        if (done) return;
        done = true;
        root.setAttribute("data-gv-render-ms", (painted ? performance.now() - started : layoutMs).toFixed(1));
        root.setAttribute("data-gv-state", painted ? "ready" : "ready-unpainted");
      };
      window.requestAnimationFrame(() => { window.requestAnimationFrame(() => finish(true)); });
      window.setTimeout(() => finish(false), 2000);
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
      this.edgeSlider = slider("edge-threshold", "edge threshold", 0.05, 1, this.firstEdgeThreshold());
      this.counts = el("span", "gv-counts");
      controls.appendChild(this.counts);
      this.positionCount = el("span", "gv-position-count");
      controls.appendChild(this.positionCount);
      header.appendChild(controls);
      if (this.firstNote) header.appendChild(el("div", "gv-note gv-first-note", this.firstNote));
      header.appendChild(this.buildToolbar());
      root.insertBefore(header, root.firstChild);

      const body = el("div", "gv-body");
      const area = el("div", "gv-area"), canvas = el("div", "gv-canvas");
      // the rows' names stay in view while the positions zoom and pan
      this.names = svg("svg", { width: LABELS, height: 100, class: "gv-rownames" });
      const s = this.svg = svg("svg", { width: 100, height: 100, class: "gv-svg" });
      this.rowLayer = svg("g", { class: "gv-grid" });
      this.colLayer = svg("g", { class: "gv-grid" });
      this.edgeLayer = svg("g", { class: "gv-edges" });
      this.edgeLayer.addEventListener("click", (event) => {
        const link = event.target.gvLink;
        if (link && !self.dragged) { event.stopPropagation(); self.selectEdge(link); }
      });
      this.superLayer = svg("g", { class: "gv-supernodes" });
      this.labelLayer = svg("g", { class: "gv-labels" });
      [this.rowLayer, this.colLayer, this.edgeLayer, this.superLayer].forEach((g) => { s.appendChild(g); });
      const nodeLayer = svg("g", { class: "gv-nodes" });
      model.nodes.forEach((n) => {
        const g = svg("g", { class: "gv-node gv-" + n.kind, "data-node-id": n.node_id });
        if (n.kind === "feature") g.appendChild(svg("circle", { r: 5 }));
        else if (n.kind === "error") g.appendChild(svg("rect", { x: -4.5, y: -4.5, width: 9, height: 9 }));
        else if (n.kind === "embedding") g.appendChild(svg("rect", { x: -5, y: -5, width: 10, height: 10, rx: 2 }));
        else {
          g.appendChild(svg("rect", { x: -6, y: -6, width: 12, height: 12, rx: 6 }));
          const text = svg("text", { y: -10, "text-anchor": "middle", class: "gv-logit-label" });
          const m = /^Output "([\s\S]*)" \(p=/.exec(n.clerp || "");
          const word = visible(m ? m[1] : String(n.feature));
          text.textContent = word.length > 5 ? word.slice(0, 4) + "\u2026" : word;
          g.appendChild(text);
        }
        g.appendChild(svg("circle", { r: 8.5, class: "gv-pin-ring" }));
        g.appendChild(svg("circle", { r: 8.5, class: "gv-match-ring" }));
        g.addEventListener("mouseenter", (event) => { self.hover(n, event); });
        g.addEventListener("mousemove", (event) => { self.moveTip(event); });
        g.addEventListener("mouseleave", () => { self.tip.style.display = "none"; });
        g.addEventListener("click", (event) => {
          if (self.dragged) return;  // the end of a pan, not a click
          self.tip.style.display = "none";
          if (event.shiftKey) self.togglePin(n.key); else self.select(n.key);
        });
        n.element = g;
        nodeLayer.appendChild(g);
      });
      s.appendChild(nodeLayer);
      s.appendChild(this.labelLayer);
      canvas.appendChild(s);
      area.appendChild(this.names);
      area.appendChild(canvas);
      body.appendChild(area);
      this.canvas = canvas;
      this.bindZoom(canvas);

      const side = el("div", "gv-side");
      this.found = el("div", "gv-found");
      this.found.style.display = "none";
      side.appendChild(this.found);
      const pinBox = el("div", "gv-pinned");
      pinBox.appendChild(el("h4", null, "Pinned nodes"));
      this.pinList = el("ul", "gv-pin-list");
      pinBox.appendChild(this.pinList);
      pinBox.appendChild(el("p", "gv-note", "Shift+click a node, or use Pin in its details, to pin it; pinned nodes stay through pruning."));
      side.appendChild(pinBox);
      side.appendChild(this.buildSupernodeBox());
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
      legend.appendChild(el("span", "gv-lg", "\u22ef positions with no kept node (collapsed) \u00b7 wheel: zoom \u00b7 drag: pan \u00b7 double-click: fit"));
      root.insertBefore(legend, body.nextSibling);
    }

    /* 1 (the file as it is), or for a file of more than FIRST_EDGES edges the threshold (in
     * hundredths, down) whose strongest edges are at most FIRST_EDGES: a wall of tens of
     * thousands of lines shows nothing, and the slider still reaches them all. */
    firstEdgeThreshold() {
      const model = this.model;
      if (model.links.length <= FIRST_EDGES) return 1;
      const all = prune(model, model.fileNodeThreshold, 1);
      if (all.edges.length <= FIRST_EDGES || !(all.total > 0)) return 1;
      let sum = 0;
      for (let k = 0; k < FIRST_EDGES; k++) sum += all.ordered[k];
      const threshold = Math.max(0.05, Math.floor(100 * sum / all.total) / 100);
      this.firstNote = "opened at edge threshold " + threshold.toFixed(2) + " (at most " + FIRST_EDGES +
        " of its " + all.edges.length + " edges); slide it to 1 to draw them all";
      return threshold;
    }

    // find, zoom and collapse
    buildToolbar() {
      const self = this, bar = el("div", "gv-toolbar");
      const find = el("label", "gv-find");
      find.appendChild(el("span", null, "find"));
      const input = this.findInput = el("input");
      input.type = "search"; input.name = "find"; input.placeholder = "text, #feature, L1 #5, @position, node id";
      input.addEventListener("input", () => { self.search(input.value); });
      input.addEventListener("keydown", (event) => { if (event.key === "Enter" && self.matches.length) self.focusNode(self.matches[0]); });
      find.appendChild(input);
      this.findCount = el("span", "gv-find-count");
      find.appendChild(this.findCount);
      bar.appendChild(find);
      const zoom = el("span", "gv-zoom");
      [["\u2212", "zoom-out", () => self.zoomBy(1 / 1.5)], ["fit", "zoom-fit", () => self.fit()], ["+", "zoom-in", () => self.zoomBy(1.5)]].forEach((b) => {
        const button = el("button", "gv-" + b[1], b[0]);
        button.type = "button"; button.name = b[1];
        button.addEventListener("click", b[2]);
        zoom.appendChild(button);
      });
      this.zoomLabel = el("span", "gv-zoom-label");
      zoom.appendChild(this.zoomLabel);
      bar.appendChild(zoom);
      const collapse = el("label", "gv-collapse");
      const box = el("input");
      box.type = "checkbox"; box.name = "collapse"; box.checked = true;
      box.addEventListener("change", () => { self.collapse = box.checked; self.update(); });
      collapse.appendChild(box);
      collapse.appendChild(document.createTextNode(" collapse positions with no kept node"));
      bar.appendChild(collapse);
      return bar;
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

    // prune, lay the kept nodes out again, draw their edges, fit the positions on screen
    update() {
      const model = this.model, self = this;
      const result = this.pruned = prune(model, Number(this.nodeSlider.value), Number(this.edgeSlider.value));
      this.fittedTo = this.available();
      const geo = this.geo = layout(model, result.keep, result.edges, this.fittedTo, this.collapse, this.expanded);
      while (this.edgeLayer.firstChild) this.edgeLayer.removeChild(this.edgeLayer.firstChild);
      const edges = result.edges.slice().sort((a, b) => Math.abs(a.weight) - Math.abs(b.weight));
      const fragment = document.createDocumentFragment();
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
        path.gvLink = l;  // (one click listener on the layer: graphs have tens of thousands of edges)
        l.element = path;
        fragment.appendChild(path);
      });
      this.edgeLayer.appendChild(fragment);
      let shown = 0;
      model.nodes.forEach((n) => {
        const on = !!result.keep[n.key];
        const drawn = on && !geo.columns[geo.colOf[n.ctx_idx]].gap;
        n.element.classList.toggle("gv-hidden", !drawn);
        n.element.classList.toggle("gv-is-pinned", model.pinned.indexOf(n.key) >= 0);
        if (on) shown++;
      });
      if (this.selectedEdge && result.edges.indexOf(this.selectedEdge) < 0) this.selectedEdge = null;
      const gaps = geo.columns.filter((c) => c.gap);
      const collapsed = gaps.reduce((sum, c) => sum + c.to - c.from + 1, 0);
      this.counts.textContent = shown + " of " + model.nodes.length + " nodes \u00b7 " + edges.length + " of " + model.links.length + " edges";
      this.positionCount.textContent = (model.nPos - collapsed) + " of " + model.nPos + " positions drawn";
      this.drawGrid();
      this.fit();
      this.renderPins();
      this.renderSupernodes();
      this.highlight();
      this.renderDetails();
    }

    // the canvas's width in pixels (what the positions are fitted to)
    available() {
      return Math.max(200, (this.canvas.clientWidth || this.root.clientWidth - LABELS - 350 || 900) - 2);
    }

    // row lines and names (they do not zoom), column lines and token labels (made per layout)
    drawGrid() {
      const geo = this.geo, model = this.model;
      [this.rowLayer, this.colLayer, this.labelLayer].forEach((g) => { while (g.firstChild) g.removeChild(g.firstChild); });
      while (this.names.firstChild) this.names.removeChild(this.names.firstChild);
      this.names.setAttribute("height", geo.height);
      for (let row = 0; row < geo.nRows; row++) {
        const y = geo.rowY(row);
        this.rowLayer.appendChild(svg("line", { x1: 0, x2: 100000, y1: y, y2: y, class: "gv-rowline" }));
        const label = svg("text", { x: 6, y: y + 4, class: "gv-rowlabel" });
        label.textContent = row === 0 ? "Emb" : row === geo.nRows - 1 ? "Logit" : "L" + (row - 1);
        this.names.appendChild(label);
      }
      this.labels = geo.columns.map((c, i) => {
        if (i > 0) this.colLayer.appendChild(svg("line", { x1: geo.x[i], x2: geo.x[i], y1: TOP - 8, y2: geo.height - BOTTOM + 4, class: c.gap || geo.columns[i - 1].gap ? "gv-colline gv-gapline" : "gv-colline" }));
        const group = svg("g", {}), tip = svg("title", {});
        const full = c.gap ? "\u22ef" : visible(model.tokens[c.from] !== undefined ? model.tokens[c.from] : "");
        const tok = svg("text", { y: geo.height - BOTTOM + 16, class: c.gap ? "gv-gap" : "gv-token", "text-anchor": "middle" });
        tok.textContent = full;
        tip.textContent = c.gap ? "positions " + c.from + "\u2013" + c.to + ": " + (c.to - c.from + 1) + " tokens with no kept node" : full + " (position " + c.from + ")";
        group.appendChild(tip); group.appendChild(tok);
        const idx = svg("text", { y: geo.height - BOTTOM + 30, class: "gv-posidx", "text-anchor": "middle" });
        idx.textContent = c.gap ? "" : String(c.from);
        this.labelLayer.appendChild(group); this.labelLayer.appendChild(idx);
        return { column: c, full, tok, idx, group };
      });
    }

    /* ------------------------------------------------------------ zoom and pan (x only) */
    fit() {
      const avail = this.fittedTo;
      this.view = { s: Math.min(1, avail / this.geo.width), tx: 0 };
      this.applyView();
    }
    zoomBy(factor, px) {
      const avail = this.fittedTo, v = this.view;
      const at = px === undefined ? avail / 2 : px;
      const fitted = Math.min(1, avail / this.geo.width);
      const s = Math.max(fitted, Math.min(MAX_ZOOM, v.s * factor));
      this.view = { s, tx: at - (at - v.tx) * s / v.s };
      this.applyView();
    }
    clampView() {
      const avail = this.fittedTo, v = this.view, wide = this.geo.width * v.s;
      v.tx = wide <= avail ? 0 : Math.min(0, Math.max(avail - wide, v.tx));
    }
    screenX(x) { return x * this.view.s + this.view.tx; }
    applyView() {
      this.clampView();
      const v = this.view, geo = this.geo, self = this, avail = this.fittedTo;
      this.svg.setAttribute("width", avail);
      this.svg.setAttribute("height", geo.height);
      const zoomed = "translate(" + v.tx.toFixed(2) + ",0) scale(" + v.s.toFixed(5) + ",1)";
      this.edgeLayer.setAttribute("transform", zoomed);
      this.colLayer.setAttribute("transform", zoomed);
      this.model.nodes.forEach((n) => {
        if (!n.element.classList.contains("gv-hidden")) n.element.setAttribute("transform", "translate(" + self.screenX(n.x).toFixed(2) + "," + n.y + ")");
      });
      // token labels: shortened to their column, and thinned where columns are narrower than a character
      let tokRight = -Infinity, idxRight = -Infinity;
      this.labels.forEach((label, i) => {
        const left = this.screenX(geo.x[i]), right = this.screenX(geo.x[i + 1]), centre = (left + right) / 2;
        const chars = Math.max(1, Math.floor((right - left) / 7));
        const text = label.full.length > chars ? (chars > 2 ? label.full.slice(0, chars - 1) + "\u2026" : label.full.slice(0, chars)) : label.full;
        const half = 3.6 * text.length;
        const onScreen = right >= 0 && left <= avail;
        const showTok = onScreen && centre - half >= tokRight + 2;
        label.tok.textContent = text;
        label.tok.setAttribute("x", centre.toFixed(1));
        label.group.style.display = showTok ? "" : "none";
        if (showTok) tokRight = centre + half;
        const idxHalf = 3.1 * label.idx.textContent.length;
        const showIdx = onScreen && label.idx.textContent !== "" && centre - idxHalf >= idxRight + 6;
        label.idx.setAttribute("x", centre.toFixed(1));
        label.idx.style.display = showIdx ? "" : "none";
        if (showIdx) idxRight = centre + idxHalf;
      });
      this.zoomLabel.textContent = Math.round(v.s * 100) + "%";
      this.placeSupernodes();
    }
    bindZoom(canvas) {
      const self = this;
      canvas.addEventListener("wheel", (event) => {
        event.preventDefault();
        const box = self.svg.getBoundingClientRect();
        if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) { self.view.tx -= event.deltaX; self.applyView(); return; }
        self.zoomBy(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left);
      }, { passive: false });
      canvas.addEventListener("pointerdown", (event) => {
        if (event.button !== 0) return;
        self.drag = { x: event.clientX, tx: self.view.tx };
        self.dragged = false;
      });
      window.addEventListener("pointermove", (event) => {
        if (!self.drag) return;
        const dx = event.clientX - self.drag.x;
        if (Math.abs(dx) > 3) self.dragged = true;
        if (!self.dragged) return;
        self.view.tx = self.drag.tx + dx;
        if (!self.panFrame) {
          self.panFrame = true;
          window.requestAnimationFrame(() => { self.panFrame = false; self.applyView(); });
        }
      });
      window.addEventListener("pointerup", () => {
        self.drag = null;
        window.setTimeout(() => { self.dragged = false; }, 0);
      });
      window.addEventListener("resize", () => { if (self.geo && Math.abs(self.available() - self.fittedTo) > 1) self.scheduleUpdate(); });
      canvas.addEventListener("dblclick", (event) => { if (event.target === self.svg) self.fit(); });
      canvas.addEventListener("click", (event) => {
        if (event.target === self.svg && !self.dragged && self.selectedEdge) { self.selectedEdge = null; self.head = null; self.highlight(); self.renderDetails(); }
      });
    }
    // centre a node (zoomed in to at least 100%), select it
    focusNode(n) {
      if (n.element.classList.contains("gv-hidden")) return;
      const avail = this.fittedTo;
      const s = Math.max(this.view.s, 1);
      this.view = { s, tx: avail / 2 - n.x * s };
      this.applyView();
      this.selected = null;
      this.select(n.key);
      n.element.scrollIntoView({ block: "nearest", inline: "nearest" });
    }

    highlight() {
      const id = this.selected, edge = this.selectedEdge;
      this.root.classList.toggle("gv-has-selection", !!id || !!edge);
      (this.pruned ? this.pruned.edges : []).forEach((l) => {
        l.element.classList.toggle("gv-edge-on", edge ? l === edge : l.source.key === id || l.target.key === id);
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
      this.selectedEdge = null;
      this.head = null;
      this.highlight();
      this.renderDetails();
    }

    // an edge: its head loadings in the details (and its ends highlighted)
    selectEdge(link) {
      this.selectedEdge = link;
      this.selected = null;
      this.head = null;
      this.highlight();
      this.renderDetails();
    }

    // a head at a query position (and the key position it attends to, or null: all saved)
    selectHead(layer, head, query, key) {
      this.head = { layer, head, query, key };
      this.renderDetails();
    }

    /* ------------------------------------------------------------------- find */
    /* Nodes matching a query: "#5" or "5" (feature 5, any layer), "L1 #5", "@12" (position 12),
     * a node id, else text: the positions whose tokens the text spans in the prompt (it may
     * cross tokens) and the nodes whose clerp holds it (case-insensitive). */
    search(query) {
      const model = this.model, q = String(query).trim();
      let matches = [];
      const feature = /^(?:L(\d+)\s*)?#?(\d+)$/i.exec(q), at = /^@(\d+)$/.exec(q);
      if (!q) matches = [];
      else if (at) matches = model.nodes.filter((n) => n.ctx_idx === Number(at[1]));
      else if (model.byId[q]) matches = model.byId[q].slice();
      else if (feature) {
        matches = model.nodes.filter((n) => n.kind === "feature" && featureIndex(n) === Number(feature[2]) &&
          (feature[1] === undefined || Number(n.layer) === Number(feature[1])));
      } else {
        const positions = {}, starts = [];
        let text = "";
        model.tokens.forEach((t) => { starts.push(text.length); text += String(t); });
        for (let i = text.indexOf(q); i >= 0; i = text.indexOf(q, i + 1)) {
          model.tokens.forEach((t, p) => {
            if (starts[p] < i + q.length && starts[p] + String(t).length > i) positions[p] = true;
          });
        }
        const lower = q.toLowerCase();
        matches = model.nodes.filter((n) => positions[n.ctx_idx] || (n.clerp && n.clerp.toLowerCase().indexOf(lower) >= 0));
      }
      const keep = this.pruned.keep;
      matches.sort((a, b) => (keep[b.key] ? 1 : 0) - (keep[a.key] ? 1 : 0) || b.row - a.row || a.ctx_idx - b.ctx_idx);
      this.matches = matches;
      // the matched positions are drawn even where they would collapse
      const expanded = matches.map((n) => n.ctx_idx).filter((p, i, all) => all.indexOf(p) === i).sort((a, b) => a - b);
      if (String(expanded) !== String(this.expanded || [])) { this.expanded = expanded; this.update(); }
      const on = {};
      matches.forEach((n) => { on[n.key] = true; });
      model.nodes.forEach((n) => { n.element.classList.toggle("gv-match", !!on[n.key]); });
      this.root.classList.toggle("gv-searching", matches.length > 0);
      const shown = matches.filter((n) => !n.element.classList.contains("gv-hidden")).length;
      this.findCount.textContent = q ? matches.length + " found, " + shown + " shown" : "";
      this.renderFound(q);
    }
    renderFound(q) {
      const self = this, box = this.found, keep = this.pruned.keep;
      while (box.firstChild) box.removeChild(box.firstChild);
      box.style.display = q ? "" : "none";
      if (!q) return;
      box.appendChild(el("h4", null, "Found: " + this.matches.length));
      if (!this.matches.length) box.appendChild(el("p", "gv-note", "no node matches " + JSON.stringify(q)));
      const list = el("ul", "gv-found-list");
      this.matches.slice(0, 40).forEach((n) => {
        const li = el("li");
        if (!n.element.classList.contains("gv-hidden")) {
          const link = el("a", null, shortLabel(n));
          link.href = "#"; link.addEventListener("click", (e) => { e.preventDefault(); self.focusNode(n); });
          li.appendChild(link);
        } else li.appendChild(el("span", "gv-note", shortLabel(n) + " (pruned at these thresholds)"));
        list.appendChild(li);
      });
      box.appendChild(list);
      if (this.matches.length > 40) box.appendChild(el("p", "gv-note", "and " + (this.matches.length - 40) + " more"));
    }

    /* ------------------------------------------------------------------ supernodes */
    buildSupernodeBox() {
      const self = this, box = el("div", "gv-supernode-box");
      box.appendChild(el("h4", null, "Supernodes"));
      this.superList = el("ul", "gv-supernode-list");
      box.appendChild(this.superList);
      const name = this.superName = el("input");
      name.type = "text"; name.name = "supernode-name"; name.placeholder = "name";
      const group = el("button", "gv-group", "Group pinned");
      group.type = "button"; group.name = "group";
      group.addEventListener("click", () => { self.groupPinned(name.value); });
      const save = el("button", "gv-download", "Download JSON");
      save.type = "button"; save.name = "download";
      save.addEventListener("click", () => { self.download(); });
      const row = el("div", "gv-supernode-controls");
      [name, group, save].forEach((item) => { row.appendChild(item); });
      box.appendChild(row);
      box.appendChild(el("p", "gv-note", "Pin nodes (Shift+click), name them and group them (the pinned nodes in no group yet); Download JSON saves the groups in qParams.supernodes (and their members in pinnedIds), as Neuronpedia reads them."));
      return box;
    }
    // the pinned nodes in no group yet become one supernode (members stay pinned, as
    // Neuronpedia wants them)
    groupPinned(label) {
      const model = this.model, grouped = {};
      model.supernodes.forEach((g) => { g.ids.forEach((id) => { grouped[id] = true; }); });
      const ids = model.pinned.map((key) => model.byKey[key].node_id).filter((id, i, all) => all.indexOf(id) === i && !grouped[id]);
      if (!ids.length) { this.superName.value = ""; this.superName.placeholder = "pin nodes in no group first"; return; }
      model.supernodes.push({ label: String(label).trim() || "supernode " + (model.supernodes.length + 1), ids });
      this.superName.value = "";
      this.renderSupernodes();
    }
    ungroup(index) {
      this.model.supernodes.splice(index, 1);
      this.renderSupernodes();
    }
    renderSupernodes() {
      const self = this, model = this.model, list = this.superList;
      while (list.firstChild) list.removeChild(list.firstChild);
      if (!model.supernodes.length) list.appendChild(el("li", "gv-note", "none"));
      model.nodes.forEach((n) => { n.supernode = null; });
      model.supernodes.forEach((g, i) => {
        const colour = SUPERNODE_COLOURS[i % SUPERNODE_COLOURS.length];
        g.ids.forEach((id) => { model.byId[id].forEach((n) => { n.supernode = i; }); });
        const li = el("li"), swatch = el("i", "gv-swatch");
        swatch.style.background = colour;
        li.appendChild(swatch);
        li.appendChild(el("span", "gv-supernode-name", g.label + " (" + g.ids.length + ")"));
        const remove = el("button", "gv-unpin", "\u00d7"); remove.title = "ungroup"; remove.type = "button";
        remove.addEventListener("click", () => { self.ungroup(i); });
        li.appendChild(remove);
        list.appendChild(li);
      });
      this.placeSupernodes();
    }
    // a ring in the group's colour on each drawn member, the group's name over its top member
    placeSupernodes() {
      const layer = this.superLayer, model = this.model, self = this;
      if (!layer) return;
      while (layer.firstChild) layer.removeChild(layer.firstChild);
      model.supernodes.forEach((g, i) => {
        const colour = SUPERNODE_COLOURS[i % SUPERNODE_COLOURS.length];
        let top = null;
        g.ids.forEach((id) => {
          model.byId[id].forEach((n) => {
            if (n.element.classList.contains("gv-hidden")) return;
            const x = self.screenX(n.x);
            layer.appendChild(svg("circle", { cx: x, cy: n.y, r: 9, class: "gv-sn-ring", stroke: colour }));
            if (!top || n.y < top.y) top = { x, y: n.y };
          });
        });
        if (top) {
          const text = svg("text", { x: top.x + 10, y: top.y - 9, class: "gv-sn-label", fill: colour });
          text.textContent = g.label;
          layer.appendChild(text);
        }
      });
    }
    /* The graph JSON with this view's state in qParams, as Neuronpedia reads it: supernodes
     * [[label, node_id, ...]], pinnedIds (the pins and every member: Neuronpedia's subgraph
     * draws pinned nodes only) and clickedId; other fields as they were. */
    exportGraph() {
      const model = this.model, graph = model.graph;
      const pinned = model.pinned.map((key) => model.byKey[key].node_id);
      model.supernodes.forEach((g) => { g.ids.forEach((id) => { if (pinned.indexOf(id) < 0) pinned.push(id); }); });
      const q = Object.assign({}, graph.qParams || {}, {
        pinnedIds: pinned,
        supernodes: model.supernodes.map((g) => [g.label].concat(g.ids)),
        clickedId: this.selected ? model.byKey[this.selected].node_id : "",
      });
      return Object.assign({}, graph, { qParams: q });
    }
    download() {
      const graph = this.exportGraph(), slug = (graph.metadata && graph.metadata.slug) || "graph";
      const blob = new Blob([JSON.stringify(graph, null, 2)], { type: "application/json" });
      const link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = slug + ".json";
      document.body.appendChild(link);
      link.click();
      document.body.removeChild(link);
      window.setTimeout(() => { URL.revokeObjectURL(link.href); }, 1000);
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
      if (this.selectedEdge) { this.renderEdge(box, this.selectedEdge); this.renderHead(box); return; }
      const n = this.selected ? model.byKey[this.selected] : null;
      if (!n) { box.appendChild(el("p", "gv-note", "Hover a node for its details; click one to see its strongest edges and logit effects, an edge (or an edge's weight in a list) for its head loadings.")); return; }
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
      this.renderHeadsAt(box, n.ctx_idx);
      this.renderHead(box);
      const extra = this.extraOf(n);
      if (extra) this.renderExtra(box, extra);
    }

    /* ------------------------------------------- attention: head loadings and QK pairs */
    // an edge: weight, ends, and its split over heads (graph.attention.head_loadings)
    renderEdge(box, link) {
      const self = this, model = this.model;
      box.appendChild(el("h3", "gv-detail-title", "Edge " + shortLabel(link.source) + " \u2192 " + shortLabel(link.target)));
      const facts = el("table", "gv-facts");
      [["weight", (link.weight >= 0 ? "+" : "") + fmt(link.weight)], ["from", shortLabel(link.source)], ["to", shortLabel(link.target)]].forEach((r, i) => {
        const tr = el("tr"); tr.appendChild(el("th", null, r[0]));
        const td = el("td");
        if (i === 0) td.textContent = r[1];
        else {
          const node = i === 1 ? link.source : link.target, a = el("a", null, r[1]);
          a.href = "#"; a.addEventListener("click", (e) => { e.preventDefault(); self.selected = null; self.select(node.key); });
          td.appendChild(a);
        }
        tr.appendChild(td); facts.appendChild(tr);
      });
      box.appendChild(facts);
      const loading = loadingsOf(model, link), panel = el("div", "gv-loadings");
      panel.appendChild(el("h4", null, "Head loadings"));
      box.appendChild(panel);
      if (!loading) {
        panel.appendChild(el("p", "gv-note", "No head loadings saved for this edge (trace with interp.circuits.annotate_attention to add them)."));
        return;
      }
      panel.appendChild(el("p", "gv-note", "The edge split over the attention heads its path runs through (a path through several heads counts for its " +
        (model.attention.rule === "first-head" ? "first" : "last") + " head), and what does not go through attention. Click a head for its QK pairs."));
      const table = el("table", "gv-loading-table");
      const head = el("tr");
      ["", "value", "share"].forEach((t) => { head.appendChild(el("th", null, t)); });
      table.appendChild(head);
      const query = link.target.ctx_idx, key = link.source.ctx_idx;
      function row(name, value, onClick) {
        const tr = el("tr"), td = el("td");
        if (onClick) {
          const a = el("a", "gv-head", name); a.href = "#";
          a.addEventListener("click", (e) => { e.preventDefault(); onClick(); });
          td.appendChild(a);
        } else td.textContent = name;
        tr.appendChild(td);
        tr.appendChild(el("td", value >= 0 ? "gv-pos" : "gv-neg", (value >= 0 ? "+" : "") + fmt(value)));
        tr.appendChild(el("td", "gv-share", share(value, loading.weight)));
        table.appendChild(tr);
      }
      loading.heads.forEach((h) => {
        row("L" + h[0] + "H" + h[1], Number(h[2]), () => { self.selectHead(h[0], h[1], query, key); });
      });
      if (loading.other) row("other heads", Number(loading.other));
      row("not through attention", Number(loading.bypass || 0));
      panel.appendChild(table);
    }

    // the heads with QK attributions saved at a query position
    renderHeadsAt(box, position) {
      const self = this, entries = qkAt(this.model, position);
      if (!entries.length) return;
      box.appendChild(el("h4", null, "Heads attending from position " + position));
      const table = el("table", "gv-heads-at");
      entries.slice(0, 12).forEach((q) => {
        const tr = el("tr"), td = el("td"), a = el("a", "gv-head", "L" + q.layer + "H" + q.head + " \u2192 @" + q.key_pos + " " + visible(self.model.tokens[q.key_pos] || ""));
        a.href = "#"; a.addEventListener("click", (e) => { e.preventDefault(); self.selectHead(q.layer, q.head, q.query_pos, q.key_pos); });
        td.appendChild(a); tr.appendChild(td);
        tr.appendChild(el("td", null, "score " + fmt(q.score)));
        tr.appendChild(el("td", null, q.pattern === undefined || q.pattern === null ? "" : "attn " + fmt(q.pattern)));
        table.appendChild(tr);
      });
      box.appendChild(table);
    }

    // the selected head's strongest QK pairs (query-side x key-side node), share of the score
    renderHead(box) {
      const h = this.head, self = this, model = this.model;
      if (!h) return;
      const panel = el("div", "gv-qk");
      panel.appendChild(el("h4", null, "QK pairs of L" + h.layer + "H" + h.head + " from position " + h.query));
      box.appendChild(panel);
      const entries = qkOf(model, h.layer, h.head, h.query).filter((q) => h.key === null || q.key_pos === h.key);
      if (!entries.length) {
        panel.appendChild(el("p", "gv-note", "No QK attributions saved for this head at position " + h.query +
          (h.key === null ? "" : " attending to " + h.key) + "."));
        return;
      }
      entries.forEach((q) => {
        const facts = "key position " + q.key_pos + " (" + visible(model.tokens[q.key_pos] || "") + ") \u00b7 score " + fmt(q.score) +
          (q.capped_score === null || q.capped_score === undefined ? "" : " (capped " + fmt(q.capped_score) + ")") +
          (q.pattern === null || q.pattern === undefined ? "" : " \u00b7 attention " + fmt(q.pattern));
        panel.appendChild(el("p", "gv-note", facts));
        const table = el("table", "gv-qk-table"), head = el("tr");
        ["query side", "key side", "value", "share"].forEach((t) => { head.appendChild(el("th", null, t)); });
        table.appendChild(head);
        function name(rows, index) {
          const r = (rows || [])[index] || {}, nodes = r.node_id ? model.byId[r.node_id] : null, td = el("td");
          if (nodes) {
            const a = el("a", null, shortLabel(nodes[0])); a.href = "#";
            a.addEventListener("click", (e) => { e.preventDefault(); self.selected = null; self.select(nodes[0].key); });
            td.appendChild(a);
          } else td.textContent = r.label !== undefined ? String(r.label) : String(r.node_id || index);
          return td;
        }
        q.pairs.forEach((pair) => {
          const tr = el("tr"), value = Number(pair[2]);
          tr.appendChild(name(q.query_rows, pair[0]));
          tr.appendChild(name(q.key_rows, pair[1]));
          tr.appendChild(el("td", value >= 0 ? "gv-pos" : "gv-neg", (value >= 0 ? "+" : "") + fmt(value)));
          tr.appendChild(el("td", "gv-share", share(value, q.score)));
          table.appendChild(tr);
        });
        [["other pairs", q.other], ["rounding", q.remainder]].forEach((r) => {
          if (r[1] === undefined || r[1] === null) return;
          const tr = el("tr"), td = el("td", null, r[0]);
          td.colSpan = 2; tr.appendChild(td);
          tr.appendChild(el("td", "gv-num", fmt(Number(r[1])))); tr.appendChild(el("td", "gv-share", share(Number(r[1]), q.score)));
          table.appendChild(tr);
        });
        panel.appendChild(table);
      });
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
