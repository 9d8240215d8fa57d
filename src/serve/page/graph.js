// Draws a program's graph (the nodes and edges of GET /v1/programs/NAME/graph)
// as SVG with a small layered layout: one column per flow, steps in layers
// down the column, the nodes outside every flow (user message, run, signals)
// in a row above. No library: Mermaid's JS is larger than the whole server.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const CHAR_WIDTH = 6.9;
  const LINE_HEIGHT = 16;
  const MAX_CHARS = 36;
  const LAYER_GAP = 58;
  const NODE_GAP = 26;
  const CLUSTER_PAD = 18;
  const CLUSTER_TITLE = 24;
  const CLUSTER_GAP = 36;

  function el(name, attributes, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, String(value));
    if (parent) parent.appendChild(node);
    return node;
  }

  function clip(text) {
    return text.length > MAX_CHARS ? text.slice(0, MAX_CHARS - 1) + "…" : text;
  }

  function measure(node) {
    const lines = (node.lines && node.lines.length ? node.lines : [node.id]).map(clip);
    const widest = Math.max(...lines.map((line) => line.length));
    node.shown = lines;
    node.w = Math.max(64, Math.round(widest * CHAR_WIDTH + 22));
    node.h = lines.length * LINE_HEIGHT + 12;
  }

  // Layers by longest path over the edges left after dropping those that
  // close a cycle (found by a depth-first walk in declaration order, so a
  // loop back to an earlier step is the edge drawn going up).
  function layer(nodes, edges) {
    const index = new Map(nodes.map((node, i) => [node.id, i]));
    const out = nodes.map(() => []);
    for (const edge of edges) out[index.get(edge.from)].push(edge);
    const state = nodes.map(() => 0);
    const back = new Set();
    const visit = (i) => {
      state[i] = 1;
      for (const edge of out[i]) {
        const j = index.get(edge.to);
        if (state[j] === 1) back.add(edge);
        else if (state[j] === 0) visit(j);
      }
      state[i] = 2;
    };
    nodes.forEach((_, i) => { if (state[i] === 0) visit(i); });
    const forward = edges.filter((edge) => !back.has(edge) && edge.from !== edge.to);
    const incoming = nodes.map(() => 0);
    for (const edge of forward) incoming[index.get(edge.to)] += 1;
    const queue = nodes.map((_, i) => i).filter((i) => incoming[i] === 0);
    const depth = nodes.map(() => 0);
    while (queue.length) {
      const i = queue.shift();
      for (const edge of out[i]) {
        if (back.has(edge) || edge.from === edge.to) continue;
        const j = index.get(edge.to);
        depth[j] = Math.max(depth[j], depth[i] + 1);
        incoming[j] -= 1;
        if (incoming[j] === 0) queue.push(j);
      }
    }
    nodes.forEach((node, i) => { node.layer = depth[i]; });
    return { back, forward };
  }

  // Orders each layer by the mean position of its neighbours, a few sweeps
  // down and up: enough for programs people write by hand.
  function order(nodes, forward) {
    const layers = [];
    for (const node of nodes) (layers[node.layer] = layers[node.layer] || []).push(node);
    const byId = new Map(nodes.map((node) => [node.id, node]));
    const up = new Map(nodes.map((node) => [node.id, []]));
    const down = new Map(nodes.map((node) => [node.id, []]));
    for (const edge of forward) {
      up.get(edge.to).push(byId.get(edge.from));
      down.get(edge.from).push(byId.get(edge.to));
    }
    const place = (layerNodes) => layerNodes.forEach((node, i) => { node.order = i; });
    layers.forEach((layerNodes) => place(layerNodes || []));
    for (let sweep = 0; sweep < 4; sweep++) {
      const downward = sweep % 2 === 0;
      const sequence = downward ? layers.keys() : [...layers.keys()].reverse();
      for (const l of sequence) {
        const layerNodes = layers[l] || [];
        const key = (node) => {
          const near = (downward ? up : down).get(node.id);
          return near.length ? near.reduce((sum, other) => sum + other.order, 0) / near.length : node.order;
        };
        layerNodes.sort((a, b) => key(a) - key(b) || a.order - b.order);
        place(layerNodes);
      }
    }
    return layers.map((layerNodes) => layerNodes || []);
  }

  // x by the centres of a node's parents where there is room, so chains
  // stay straight; then pushed apart left to right.
  function coordinates(layers, forward) {
    const parents = new Map();
    for (const edge of forward) {
      if (!parents.has(edge.to)) parents.set(edge.to, []);
      parents.get(edge.to).push(edge.from);
    }
    const byId = new Map();
    layers.flat().forEach((node) => byId.set(node.id, node));
    let y = 0;
    for (const layerNodes of layers) {
      const height = Math.max(0, ...layerNodes.map((node) => node.h));
      let cursor = 0;
      for (const node of layerNodes) {
        const ps = (parents.get(node.id) || []).map((id) => byId.get(id)).filter((p) => p.cx !== undefined);
        const wanted = ps.length ? ps.reduce((sum, p) => sum + p.cx, 0) / ps.length : cursor + node.w / 2;
        node.cx = Math.max(wanted, cursor + node.w / 2);
        cursor = node.cx + node.w / 2 + NODE_GAP;
        node.cy = y + height / 2;
      }
      y += height + LAYER_GAP;
    }
    const all = layers.flat();
    const left = Math.min(...all.map((node) => node.cx - node.w / 2));
    all.forEach((node) => { node.cx -= left; });
    const width = Math.max(...all.map((node) => node.cx + node.w / 2));
    return { width, height: Math.max(0, y - LAYER_GAP) };
  }

  function layout(graph) {
    const nodes = graph.nodes.map((node) => ({ ...node }));
    nodes.forEach(measure);
    const byId = new Map(nodes.map((node) => [node.id, node]));
    const edges = graph.edges.filter((edge) => byId.has(edge.from) && byId.has(edge.to));
    const clusterOf = (node) => node.flow;
    const boxes = [];
    let x = 0;
    const backEdges = new Set();
    // Outside every box: the user message, a run's start, signals (and
    // anything naming a flow that has no box, rather than lose it).
    const boxed = new Set(graph.clusters.map((cluster) => cluster.flow));
    const top = nodes.filter((node) => !boxed.has(node.flow));
    const topHeight = top.length ? Math.max(...top.map((node) => node.h)) + LAYER_GAP + 20 : 0;
    for (const cluster of graph.clusters) {
      const members = nodes.filter((node) => clusterOf(node) === cluster.flow);
      if (!members.length) continue;
      const ids = new Set(members.map((node) => node.id));
      const inner = edges.filter((edge) => ids.has(edge.from) && ids.has(edge.to));
      const { back, forward } = layer(members, inner);
      back.forEach((edge) => backEdges.add(edge));
      const size = coordinates(order(members, forward), forward);
      const titleWidth = cluster.title.length * CHAR_WIDTH + 2 * CLUSTER_PAD;
      const width = Math.max(size.width + 2 * CLUSTER_PAD, titleWidth);
      const shift = (width - size.width) / 2;
      for (const node of members) {
        node.cx += x + shift;
        node.cy += topHeight + CLUSTER_TITLE + CLUSTER_PAD;
      }
      const box = { cluster, x, y: topHeight, w: width, h: size.height + CLUSTER_TITLE + 2 * CLUSTER_PAD };
      members.forEach((node) => { node.box = box; });
      boxes.push(box);
      x += width + CLUSTER_GAP;
    }
    // Each free node above the flows it leads into, pushed apart.
    let cursor = 0;
    for (const node of top) {
      const targets = edges.filter((edge) => edge.from === node.id).map((edge) => byId.get(edge.to)).filter((t) => t.cx !== undefined && boxed.has(t.flow));
      const wanted = targets.length ? targets.reduce((sum, t) => sum + t.cx, 0) / targets.length : cursor + node.w / 2;
      node.cx = Math.max(wanted, cursor + node.w / 2);
      node.cy = node.h / 2;
      cursor = node.cx + node.w / 2 + NODE_GAP;
    }
    const width = Math.max(x - CLUSTER_GAP, cursor - NODE_GAP, 1);
    const height = Math.max(topHeight, ...boxes.map((box) => box.y + box.h), 1);
    return { nodes, byId, edges, boxes, backEdges, width, height };
  }

  function bezier(segment, t) {
    const [a, b, c, d] = segment;
    const s = 1 - t;
    const at = (k) => s * s * s * a[k] + 3 * s * s * t * b[k] + 3 * s * t * t * c[k] + t * t * t * d[k];
    return [at(0), at(1)];
  }

  // Straight runs between the points, each corner rounded: as cubic
  // segments, like every other route.
  function polyline(points, radius) {
    const segments = [];
    const toward = (a, b, d) => {
      const length = Math.hypot(b[0] - a[0], b[1] - a[1]) || 1;
      const t = Math.min(d, length / 2) / length;
      return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t];
    };
    const line = (a, b) => segments.push([a, [a[0] + (b[0] - a[0]) / 3, a[1] + (b[1] - a[1]) / 3], [a[0] + 2 * (b[0] - a[0]) / 3, a[1] + 2 * (b[1] - a[1]) / 3], b]);
    let start = points[0];
    for (let i = 1; i < points.length - 1; i++) {
      const corner = points[i];
      const before = toward(corner, points[i - 1], radius);
      const after = toward(corner, points[i + 1], radius);
      line(start, before);
      segments.push([before, corner, corner, after]);
      start = after;
    }
    line(start, points[points.length - 1]);
    return segments;
  }

  // Between two flows' boxes: out of the source's side into the gap beside
  // its box, over the boxes between (above them) when there are any, down
  // the gap beside the target's box and into the target's side, so the line
  // crosses no flow it does not belong to.
  function crossRoute(from, to) {
    const a = from.box, b = to.box;
    const right = b.x > a.x;
    const gapA = right ? a.x + a.w + CLUSTER_GAP / 2 : a.x - CLUSTER_GAP / 2;
    const gapB = right ? b.x - CLUSTER_GAP / 2 : b.x + b.w + CLUSTER_GAP / 2;
    const sx = from.cx + (right ? from.w / 2 : -from.w / 2);
    const tx = to.cx + (right ? -to.w / 2 - 6 : to.w / 2 + 6);
    const points = [[sx, from.cy], [gapA, from.cy]];
    if (Math.abs(gapA - gapB) > 1) {
      const band = Math.min(a.y, b.y) - 12;
      points.push([gapA, band], [gapB, band]);
    }
    points.push([gapB, to.cy], [tx, to.cy]);
    return { segments: polyline(points, 10), side: null };
  }

  // A route is a chain of cubic segments: drawn as one path, and walked
  // to find room for the edge's label.
  function route(from, to, isBack, placed) {
    if (from.box && to.box && from.box !== to.box) return crossRoute(from, to);
    if (isBack || to.cy <= from.cy) {
      // Up, or beside: out of the right side and back in at the right.
      const sx = from.cx + from.w / 2, sy = from.cy, tx = to.cx + to.w / 2 + 6, ty = to.cy;
      const reach = Math.max(sx, tx) + 36 + Math.min(60, Math.abs(sy - ty) / 6);
      return { segments: [[[sx, sy], [reach, sy], [reach, ty], [tx, ty]]], side: "right" };
    }
    const sx = from.cx, sy = from.cy + from.h / 2, tx = to.cx, ty = to.cy - to.h / 2 - 6;
    // A long edge whose straight line would cross a node between its ends
    // goes around that side of them instead.
    const blocking = placed.filter((node) => node !== from && node !== to && node.cy > sy && node.cy < ty &&
      Math.abs(node.cx - (sx + (tx - sx) * (node.cy - sy) / (ty - sy))) < node.w / 2 + 6);
    if (blocking.length) {
      const right = Math.max(...blocking.map((node) => node.cx + node.w / 2)) + 22;
      const left = Math.min(...blocking.map((node) => node.cx - node.w / 2)) - 22;
      const side = Math.abs(right - sx) <= Math.abs(sx - left) ? right : left;
      const top = Math.min(...blocking.map((node) => node.cy - node.h / 2));
      const bottom = Math.max(...blocking.map((node) => node.cy + node.h / 2));
      return {
        segments: [
          [[sx, sy], [sx, (sy + top) / 2], [side, (sy + top) / 2], [side, top]],
          [[side, top], [side, (top + bottom) / 2], [side, (top + bottom) / 2], [side, bottom]],
          [[side, bottom], [side, (bottom + ty) / 2], [tx, (bottom + ty) / 2], [tx, ty]],
        ],
        side: side === right ? "right" : "left",
      };
    }
    const bend = Math.max(20, (ty - sy) / 2);
    return { segments: [[[sx, sy], [sx, sy + bend], [tx, ty - bend], [tx, ty]]], side: null };
  }

  function pathData(segments) {
    const [first] = segments;
    let d = `M${first[0][0]},${first[0][1]}`;
    for (const [, b, c, e] of segments) d += ` C${b[0]},${b[1]} ${c[0]},${c[1]} ${e[0]},${e[1]}`;
    return d;
  }

  // The first spot along the route, from its middle outwards, where the
  // label overlaps no node and no label placed before it.
  function labelSpot(path, w, h, nodes, labels) {
    const overlaps = (x, y, box) => Math.abs(x - box.x) * 2 < w + box.w && Math.abs(y - box.y) * 2 < h + box.h;
    const free = (x, y) => !nodes.some((node) => overlaps(x, y, { x: node.cx, y: node.cy, w: node.w + 4, h: node.h + 4 })) &&
      !labels.some((box) => overlaps(x, y, box));
    const spots = [];
    for (const t of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88]) {
      const where = t * path.segments.length;
      const index = Math.min(path.segments.length - 1, Math.floor(where));
      spots.push(bezier(path.segments[index], where - index));
    }
    const [x, y] = spots.find(([x, y]) => free(x, y)) || spots[0];
    const box = { x, y, w, h };
    labels.push(box);
    return box;
  }

  function render(container, graph) {
    container.textContent = "";
    if (!graph.nodes.length) {
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = "This program has no flows to draw.";
      container.appendChild(p);
      return { highlight() {}, coverage() {}, zoom: () => 1, nodeId: () => null, terminal: () => null, hasEdge: () => false };
    }
    const shape = layout(graph);
    const margin = 16;
    const svg = el("svg", {
      width: shape.width + 2 * margin + 80,
      height: shape.height + 2 * margin,
      viewBox: `${-margin} ${-margin} ${shape.width + 2 * margin + 80} ${shape.height + 2 * margin}`,
      role: "img",
      "aria-label": `Graph of ${graph.program}: ${graph.nodes.filter((n) => n.step).length} steps in ${graph.clusters.length} flow(s)`,
    });
    const defs = el("defs", {}, svg);
    for (const [id, cls] of [["arrow", "arrow"], ["arrow-taken", "arrow taken"]]) {
      // In user units: a marker scaled by the stroke would grow on taken edges.
      const marker = el("marker", { id, viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
      el("path", { d: "M0,0 L10,5 L0,10 z", class: cls }, marker);
    }
    for (const box of shape.boxes) {
      const g = el("g", { class: "g-cluster", "data-flow": box.cluster.flow }, svg);
      el("rect", { x: box.x, y: box.y, width: box.w, height: box.h, rx: 10 }, g);
      el("text", { x: box.x + 12, y: box.y + 17 }, g).textContent = box.cluster.title;
    }
    const edgeLayer = el("g", {}, svg);
    const nodeLayer = el("g", {}, svg);
    const edgeViews = [];
    const labels = [];
    // Failure paths (no answer, a failing step) are drawn only when asked
    // for or when taken: on every asking step they would hide the flow.
    const failure = (edge) => edge.kind === "no_answer" || edge.kind === "on_error";
    const ordered = [...shape.edges.filter((edge) => !failure(edge)), ...shape.edges.filter(failure)];
    for (const edge of ordered) {
      const from = shape.byId.get(edge.from), to = shape.byId.get(edge.to);
      const path = route(from, to, shape.backEdges.has(edge), shape.nodes);
      const classes = `g-edge ${edge.kind}${edge.unreachable ? " unreachable" : ""}${failure(edge) ? " failure" : ""}`;
      const g = el("g", { class: classes, "data-from": edge.from, "data-to": edge.to }, edgeLayer);
      const line = el("path", { d: pathData(path.segments), "marker-end": "url(#arrow)" }, g);
      if (edge.label) {
        const text = clip(edge.label);
        const w = text.length * 6.2 + 10;
        const spot = failure(edge) ? labelSpot(path, w, 16, shape.nodes, []) : labelSpot(path, w, 16, shape.nodes, labels);
        el("rect", { class: "label-bg", x: spot.x - w / 2, y: spot.y - 8, width: w, height: 16, rx: 3 }, g);
        const label = el("text", { x: spot.x, y: spot.y + 4, "text-anchor": "middle" }, g);
        label.textContent = text;
      }
      el("title", {}, g).textContent = `${from.shown[0]} → ${to.shown[0]}${edge.label ? ": " + edge.label : ""}`;
      edgeViews.push({ edge, g, path: line });
    }
    const nodeViews = new Map();
    for (const node of shape.nodes) {
      const g = el("g", {
        class: `g-node ${node.kind}${node.unreachable ? " unreachable" : ""}`,
        "data-id": node.id,
        "data-kind": node.kind,
        transform: `translate(${node.cx - node.w / 2},${node.cy - node.h / 2})`,
      }, nodeLayer);
      if (node.flow) g.setAttribute("data-flow", node.flow);
      if (node.step) g.setAttribute("data-step", node.step);
      const round = node.kind === "entry" || node.kind === "message" || node.kind === "run" || node.kind === "complete" || node.kind === "abort";
      el("rect", { width: node.w, height: node.h, rx: round ? node.h / 2 : 6 }, g);
      node.shown.forEach((line, i) => {
        const text = el("text", { x: node.w / 2, y: 6 + LINE_HEIGHT * (i + 1) - 4, "text-anchor": "middle", class: i === 0 ? "" : "sub" }, g);
        text.textContent = line;
      });
      el("title", {}, g).textContent = (node.lines || []).join("\n");
      nodeViews.set(node.id, g);
    }
    container.appendChild(svg);
    // Labels may reach past the nodes: the picture is framed on what was drawn.
    const box = svg.getBBox();
    svg.setAttribute("viewBox", `${box.x - margin} ${box.y - margin} ${box.width + 2 * margin} ${box.height + 2 * margin}`);
    // Shrunk to fit the pane when a little is enough (text stays legible);
    // a larger program scrolls instead.
    const natural = { width: box.width + 2 * margin, height: box.height + 2 * margin };
    const fit = Math.min(1, (container.clientWidth - 4) / natural.width, (container.clientHeight - 4) / natural.height);
    let scale = fit >= 0.72 ? fit : 1;
    const resize = () => {
      svg.setAttribute("width", natural.width * scale);
      svg.setAttribute("height", natural.height * scale);
    };
    resize();

    return {
      // Zoom: `in`, `out`, or `fit` (the whole picture in the pane).
      zoom(how) {
        if (how === "fit") scale = fit;
        else scale = Math.min(3, Math.max(0.2, scale * (how === "in" ? 1.25 : 0.8)));
        resize();
        return scale;
      },
      // current: a node id or null; visited: node ids; taken: [from, to] pairs.
      highlight({ current, visited, taken }) {
        const takenKeys = new Set((taken || []).map(([from, to]) => `${from}>${to}`));
        for (const [id, g] of nodeViews) {
          g.classList.toggle("current", id === current);
          g.classList.toggle("visited", id !== current && (visited || []).includes(id));
          if (id === current) g.setAttribute("aria-current", "step");
          else g.removeAttribute("aria-current");
        }
        for (const view of edgeViews) {
          const on = takenKeys.has(`${view.edge.from}>${view.edge.to}`);
          view.g.classList.toggle("taken", on);
          view.path.setAttribute("marker-end", on ? "url(#arrow-taken)" : "url(#arrow)");
          // Taken edges last, so they are drawn over the others.
          if (on) view.g.parentNode.appendChild(view.g);
        }
        const target = current && nodeViews.get(current);
        if (target && target.scrollIntoView) target.scrollIntoView({ block: "nearest", inline: "nearest" });
      },
      // What tests reached: node ids, and indices into the graph's edges.
      // Nodes that count for coverage (steps) and were not reached are
      // marked too, so a gap shows.
      coverage({ nodes, edges }) {
        const reached = new Set(nodes || []);
        const edgeKeys = new Set((edges || []).map((index) => graph.edges[index]).filter(Boolean).map((edge) => `${edge.from}>${edge.to}`));
        for (const [id, g] of nodeViews) {
          const step = g.hasAttribute("data-step");
          g.classList.toggle("covered", reached.has(id));
          g.classList.toggle("uncovered", step && !reached.has(id));
        }
        for (const view of edgeViews) view.g.classList.toggle("covered", edgeKeys.has(`${view.edge.from}>${view.edge.to}`));
      },
      nodeId(flow, step) {
        for (const node of shape.nodes) if (node.flow === flow && node.step === step) return node.id;
        return null;
      },
      terminal(flow, kind) {
        for (const node of shape.nodes) if (node.flow === flow && node.kind === kind) return node.id;
        return null;
      },
      hasEdge(from, to) {
        return shape.edges.some((edge) => edge.from === from && edge.to === to);
      },
    };
  }

  window.FlowGraph = { render };
})();
