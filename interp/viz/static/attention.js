// Attention patterns on canvases, fast at a few hundred tokens: a thumbnail per head of a
// layer, and the chosen head's pattern with its query (rows) and key (columns) tokens and
// the value under the pointer. Tokens are drawn with fillText and shown with textContent:
// no string reaches the page as markup. Used by interp's reports and its dashboard.
//
//   InterpAttention.heads(element, {tokens, patterns: [head][query][key], names, selected})
//   InterpAttention.pattern(element, tokens, pattern [query][key], title)
(function (root) {
  "use strict";

  function visible(text) {
    return String(text).replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
  }

  function shade(v) {
    const x = Math.max(0, Math.min(1, v));
    return [Math.round(255 * (1 - x * 0.88)), Math.round(255 * (1 - x * 0.56)), Math.round(255 * (1 - x * 0.18))];
  }

  // One pixel a (query, key) cell, scaled up by CSS.
  function drawPixels(canvas, pattern) {
    const n = pattern.length;
    canvas.width = n;
    canvas.height = n;
    const context = canvas.getContext("2d");
    const image = context.createImageData(n, n);
    for (let q = 0; q < n; q++) {
      const row = pattern[q];
      for (let k = 0; k < n; k++) {
        const [r, g, b] = shade(row[k] || 0);
        const offset = 4 * (q * n + k);
        image.data[offset] = r;
        image.data[offset + 1] = g;
        image.data[offset + 2] = b;
        image.data[offset + 3] = 255;
      }
    }
    context.putImageData(image, 0, 0);
  }

  function el(tag, text, style) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (style) element.style.cssText = style;
    return element;
  }

  // The pattern with token labels: labels drawn on a second canvas around the cells.
  function pattern(element, tokens, values, title) {
    const n = tokens.length;
    const cell = Math.max(3, Math.min(14, Math.floor(640 / n)));
    const labelWidth = n * cell >= 8 * n ? 90 : 0; // labels only where they fit (cell >= 8)
    const font = Math.min(12, cell);
    const size = n * cell;
    const box = el("div", undefined, "position: relative; display: inline-block; margin: 8px 0;");
    box.className = "interp-pattern";
    if (title) box.appendChild(el("div", title, "font-weight: 600; margin-bottom: 4px;"));
    const canvas = el("canvas");
    const ratio = root.devicePixelRatio || 1;
    canvas.width = (size + labelWidth) * ratio;
    canvas.height = (size + labelWidth) * ratio;
    canvas.style.width = `${size + labelWidth}px`;
    canvas.style.height = `${size + labelWidth}px`;
    const context = canvas.getContext("2d");
    context.scale(ratio, ratio);
    const cells = el("canvas");
    drawPixels(cells, values);
    context.imageSmoothingEnabled = false;
    context.drawImage(cells, labelWidth, labelWidth, size, size);
    if (labelWidth) {
      context.fillStyle = "#333";
      context.font = `${font}px ui-monospace, Menlo, monospace`;
      context.textBaseline = "middle";
      context.textAlign = "right";
      tokens.forEach((token, i) => {
        context.fillText(visible(token).slice(0, 10), labelWidth - 4, labelWidth + (i + 0.5) * cell);
      });
      context.save();
      context.rotate(-Math.PI / 2);
      context.textAlign = "left";
      tokens.forEach((token, i) => {
        context.fillText(visible(token).slice(0, 10), -labelWidth + 4, labelWidth + (i + 0.5) * cell);
      });
      context.restore();
    }
    const readout = el("div", "hover over a cell: query token (row) \u2192 key token (column)",
      "font: 12px ui-monospace, Menlo, monospace; color: #555; min-height: 1.4em;");
    readout.className = "interp-readout";
    canvas.addEventListener("mousemove", (event) => {
      const bounds = canvas.getBoundingClientRect();
      const q = Math.floor((event.clientY - bounds.top - labelWidth) / cell);
      const k = Math.floor((event.clientX - bounds.left - labelWidth) / cell);
      if (q < 0 || k < 0 || q >= n || k >= n) return;
      const value = values[q][k] || 0;
      readout.textContent = `${visible(tokens[q])}|${q} \u2192 ${visible(tokens[k])}|${k}: ${value.toFixed(3)}`;
    });
    box.append(canvas, readout);
    element.replaceChildren(box);
    return box;
  }

  // Every head of a layer as thumbnails; clicking one draws its pattern below.
  function heads(element, data) {
    const grid = el("div", undefined, "display: flex; flex-wrap: wrap; gap: 6px; margin: 8px 0;");
    grid.className = "interp-heads";
    const view = el("div");
    const cells = data.patterns.map((values, head) => {
      const cell = el("div", undefined, "display: flex; flex-direction: column; align-items: center; " +
        "cursor: pointer; border: 2px solid transparent; border-radius: 4px; padding: 2px; font-size: 11px;");
      cell.dataset.head = String(head);
      const canvas = el("canvas", undefined, "width: 72px; height: 72px; image-rendering: pixelated; border: 1px solid #ddd;");
      drawPixels(canvas, values);
      cell.append(canvas, el("span", data.names[head]));
      cell.addEventListener("click", () => select(head));
      return cell;
    });
    function select(head) {
      cells.forEach((cell, i) => (cell.style.borderColor = i === head ? "#1f6fd1" : "transparent"));
      pattern(view, data.tokens, data.patterns[head], `${data.names[head]} attention pattern`);
      element.dataset.selected = String(head);
    }
    grid.append(...cells);
    element.replaceChildren(grid, view);
    select(data.selected || 0);
  }

  root.InterpAttention = { heads, pattern, visible };
})(window);
