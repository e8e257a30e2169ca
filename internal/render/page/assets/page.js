// The page of an arenactl recording: charts with uPlot, flame graphs in SVG.
// Every name from the recording enters the document as text (textContent,
// SVG <text>/<title> nodes), never as markup.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const n = D.t.length;

  function human(b) {
    const neg = b < 0;
    b = Math.abs(b);
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (neg ? "-" : "") + (i ? b.toFixed(1) : Math.round(b)) + " " + u[i];
  }
  function when(t) {
    const d = new Date(t * 1000);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  $("meta").textContent = "glibc " + D.glibc + ", " + n + " intervals" +
    (n ? " from " + when(D.t[0]) + " to " + when(D.t[n - 1]) : "") +
    ", finest interval " + D.interval_s + " s" +
    (D.rate ? ", sampling every " + human(D.rate) + " on average" : ", no sampler");

  const width = () => Math.max(600, document.body.clientWidth - 40);

  // Markers: findings where they first held, events where they happened.
  const marks = [];
  D.findings.forEach((f, i) => marks.push({ t: f.first, label: "F" + (i + 1), color: "#b60" }));
  D.events.forEach((e, i) => marks.push({ t: e.t, label: "E" + (i + 1), color: "#555" }));
  const markPlugin = {
    hooks: {
      draw: (u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.font = 11 * devicePixelRatio + "px sans-serif";
        for (const m of marks) {
          const x = Math.round(u.valToPos(m.t, "x", true));
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.strokeStyle = ctx.fillStyle = m.color;
          ctx.setLineDash([4, 3]);
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillText(m.label, x + 3, u.bbox.top + 12 * devicePixelRatio);
        }
        ctx.restore();
      },
    },
  };

  // Selection shared by both charts.
  function onSelect(u) {
    if (u.select.width < 2) return;
    const t0 = u.posToVal(u.select.left, "x"), t1 = u.posToVal(u.select.left + u.select.width, "x");
    // The intervals the selection covers: from the one that holds t0 to
    // the last that ended by t1.
    let i0 = 0;
    while (i0 + 1 < n && D.t[i0] <= t0) i0++;
    let i1 = i0;
    while (i1 + 1 < n && D.t[i1 + 1] <= t1) i1++;
    setRange(i0, i1);
  }
  const axes = [{}, { values: (u, vs) => vs.map(human), size: 80 }];
  const cursor = { sync: { key: "arenactl" }, drag: { x: true, y: false, setScale: false } };

  // RSS stacked by class. The heap bands are split by malloc's own
  // figures from the latest walk at or before each interval (held,
  // pinned, trimmable, each no more than the heaps' RSS left), else by
  // the arenas' tops; what the split leaves is the heaps' rest.
  const palette = { "malloc: held (walked)": "#2f5d8a", "malloc: free, resident, pinned": "#9c755f",
    "malloc: free, resident, trimmable": "#ff9da7", "heap (held or free in bins)": "#4e79a7", "main_arena's top": "#a0cbe8",
    "thread arenas' tops": "#76b7b2", "mmapped-chunks": "#f28e2b", "other-anon": "#e15759", stacks: "#59a14f", files: "#edc948",
    special: "#bab0ac" };
  const cls = (name) => D.class_rss[D.classes.indexOf(name)] || new Array(n).fill(0);
  const heap = D.t.map((_, i) => cls("main-heap")[i] + cls("arena-heaps")[i]);
  const walkOf = new Array(n).fill(null);
  {
    const byI = new Map(D.walks.map((w) => [w.i, w]));
    let w = null;
    for (let i = 0; i < n; i++) { if (byI.has(i)) w = byI.get(i); walkOf[i] = w; }
  }
  const mHeld = [], mPinned = [], mTrim = [], mainTop = [], threadTops = [], rest = [];
  for (let i = 0; i < n; i++) {
    const w = walkOf[i];
    let left = heap[i];
    const take = (x) => { const v = Math.min(x, left); left -= v; return v; };
    mHeld.push(w ? take(w.held + w.tcache) : 0);
    mTrim.push(w ? take(w.trimmable) : 0);
    mPinned.push(w ? take(w.pinned) : 0);
    mainTop.push(w ? 0 : take(D.main_top[i]));
    threadTops.push(w ? 0 : take(D.thread_tops[i]));
    rest.push(left);
  }
  const layers = [
    ["malloc: held (walked)", mHeld],
    ["malloc: free, resident, pinned", mPinned],
    ["malloc: free, resident, trimmable", mTrim],
    ["heap (held or free in bins)", rest],
    ["main_arena's top", mainTop],
    ["thread arenas' tops", threadTops],
  ];
  for (const c of D.classes) if (c !== "main-heap" && c !== "arena-heaps") layers.push([c, cls(c)]);
  const stacked = [], acc = new Array(n).fill(0);
  for (const [, v] of layers) {
    for (let i = 0; i < n; i++) acc[i] += v[i];
    stacked.push(acc.slice());
  }
  // uPlot draws later series over earlier ones: the top layer (the
  // largest sum) first, so that each fill shows down to the one below.
  const rssSeries = [{}], rssData = [D.t];
  for (let k = layers.length - 1; k >= 0; k--) {
    const [name, v] = layers[k];
    rssSeries.push({ label: name, stroke: palette[name] || "#888", fill: palette[name] || "#888", width: 1,
      value: (u, _, s, idx) => (idx == null ? "" : human(v[idx])) });
    rssData.push(stacked[k]);
  }
  new uPlot({ width: width(), height: 320, cursor, axes, series: rssSeries, plugins: [markPlugin], hooks: { setSelect: [onSelect] } },
    rssData, $("rss-chart"));

  // The top stacks' held bytes over time.
  function label(s) {
    const f = s.frames;
    for (let i = f.length - 1; i >= 0; i--) {
      if (!/^(malloc|calloc|realloc|reallocarray|free|operator new|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|__libc_|_int_)/.test(f[i])) return f[i];
    }
    return f.length ? f[f.length - 1] : "?";
  }
  const heldOf = (i) => { const m = new Map(); for (const [s, b] of D.held[i] || []) m.set(s, b); return m; };
  const peaks = D.stacks.map(() => 0);
  for (let i = 0; i < n; i++) for (const [s, b] of D.held[i]) peaks[s] = Math.max(peaks[s], b);
  const top = peaks.map((p, s) => [p, s]).sort((a, b) => b[0] - a[0]).slice(0, 8).map((x) => x[1]);
  const colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"];
  const heldSeries = [{}], heldData = [D.t];
  top.forEach((s, k) => {
    heldSeries.push({ label: label(D.stacks[s]), stroke: colors[k], width: 2, value: (u, v) => (v == null ? "" : human(v)) });
    heldData.push(D.t.map((_, i) => heldOf(i).get(s) || 0));
  });
  heldSeries.push({ label: "other stacks", stroke: "#999", width: 1, dash: [4, 4], value: (u, v) => (v == null ? "" : human(v)) });
  heldData.push(D.other);
  new uPlot({ width: width(), height: 280, cursor, axes, series: heldSeries, plugins: [markPlugin], hooks: { setSelect: [onSelect] } },
    heldData, $("held-chart"));

  // Flame graphs.
  function tree(values) {
    // values: Map stack index -> [width value, delta]
    const root = { name: "all", w: 0, d: 0, kids: new Map() };
    for (const [s, [w, d]] of values) {
      if (w <= 0) continue;
      let node = root;
      root.w += w; root.d += d;
      for (const f of D.stacks[s].frames) {
        let k = node.kids.get(f);
        if (!k) { k = { name: f, w: 0, d: 0, kids: new Map() }; node.kids.set(f, k); }
        k.w += w; k.d += d;
        node = k;
      }
    }
    return root;
  }
  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return "hsl(" + (10 + (h % 40)) + ",80%," + (55 + (h % 15)) + "%)";
  }
  function flame(box, root, colorOf, what) {
    box.textContent = "";
    if (root.w <= 0) { box.appendChild(el("p", "nothing " + what, "empty")); return; }
    const W = width(), H = 17;
    let depth = 0;
    (function d(node, k) { depth = Math.max(depth, k); for (const c of node.kids.values()) d(c, k + 1); })(root, 0);
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", W);
    svg.setAttribute("height", (depth + 1) * H);
    function draw(node, x, k, scale) {
      const w = node.w * scale;
      if (w < 0.5) return;
      const g = document.createElementNS(SVG, "g");
      g.setAttribute("class", "frame");
      g.setAttribute("data-name", node.name);
      const r = document.createElementNS(SVG, "rect");
      r.setAttribute("x", x); r.setAttribute("y", k * H); r.setAttribute("width", Math.max(0, w - 0.5)); r.setAttribute("height", H - 1);
      r.setAttribute("fill", colorOf(node));
      const tt = document.createElementNS(SVG, "title");
      tt.textContent = node.name + ": " + human(node.w) + (node.d !== node.w ? " (" + (node.d >= 0 ? "+" : "") + human(node.d) + ")" : "");
      g.appendChild(tt);
      g.appendChild(r);
      if (w > 30) {
        const t = document.createElementNS(SVG, "text");
        t.setAttribute("x", x + 3); t.setAttribute("y", k * H + 12);
        const fit = Math.floor((w - 6) / 6.6);
        t.textContent = node.name.length > fit ? node.name.slice(0, Math.max(0, fit - 1)) + "…" : node.name;
        g.appendChild(t);
      }
      g.addEventListener("click", () => flame(box, node, colorOf, what));
      svg.appendChild(g);
      let cx = x;
      for (const c of [...node.kids.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) { draw(c, cx, k + 1, scale); cx += c.w * scale; }
    }
    draw(root, 0, 0, W / root.w);
    box.appendChild(svg);
  }

  function setRange(i0, i1) {
    if (n === 0) return;
    i0 = Math.max(0, Math.min(i0, n - 1)); i1 = Math.max(i0, Math.min(i1, n - 1));
    // Held counts from the recording's start: the range's start is the
    // end of the interval before it, or the start itself.
    const a = i0 > 0 ? heldOf(i0 - 1) : new Map(), b = heldOf(i1), v = new Map();
    for (const [s, x] of b) { const g = x - (a.get(s) || 0); if (g > 0) v.set(s, [g, g]); }
    $("range-label").textContent = when(i0 > 0 ? D.t[i0 - 1] : D.start) + " to " + when(D.t[i1]) + ": " +
      human([...v.values()].reduce((x, y) => x + y[0], 0));
    flame($("range-flame"), tree(v), (node) => hue(node.name), "allocated in this range is still held at its end");
  }

  function setDiff(ia, ib) {
    if (n === 0) return;
    const a = heldOf(ia), b = heldOf(ib), v = new Map();
    for (const s of new Set([...a.keys(), ...b.keys()])) {
      const x = a.get(s) || 0, y = b.get(s) || 0;
      v.set(s, [Math.max(x, y), y - x]);
    }
    const root = tree(v);
    $("diff-label").textContent = "B - A: " + human(root.d);
    flame($("diff-flame"), root, (node) => {
      const r = node.w ? node.d / node.w : 0;
      const l = 95 - Math.min(45, Math.abs(r) * 45);
      return r >= 0 ? "hsl(0,80%," + l + "%)" : "hsl(220,80%," + l + "%)";
    }, "held at either time");
  }

  // The waterfall at one interval: the stacked layers, each with what
  // would lower it, adding up to the RSS read with them.
  const actions = {
    "malloc: held (walked)": "the program's own: the held chart above says by which stacks",
    "malloc: free, resident, pinned": "pieces of pages beside held chunks and thread arenas' tops: MALLOC_ARENA_MAX=2, MALLOC_TRIM_THRESHOLD_=131072",
    "malloc: free, resident, trimmable": "`arenactl trim PID` (malloc_trim(0)) gives it back now",
    "heap (held or free in bins)": "the program's own, or free in bins: `arenactl info PID` splits it; the held chart above says by which stacks",
    "main_arena's top": "`arenactl trim PID` (malloc_trim) gives it back; MALLOC_TRIM_THRESHOLD_=131072 lets free() do it",
    "thread arenas' tops": "only free() shrinks them, above trim_threshold: MALLOC_TRIM_THRESHOLD_=131072, or MALLOC_ARENA_MAX=2",
    "mmapped-chunks": "given back at free(); MALLOC_MMAP_THRESHOLD_ sets which sizes are mmapped",
    "other-anon": "mapped by the program or a library itself: `arenactl maps --all PID` lists them",
    stacks: "fewer threads, or smaller stacks (pthread_attr_setstacksize, ulimit -s)",
    files: "page cache: clean pages are reclaimed by the kernel under pressure",
    special: "the kernel's ([vdso], [vvar])",
  };
  function waterfall(i) {
    const body = $("waterfall").tBodies[0];
    body.textContent = "";
    if (i < 0 || i >= n) return;
    const row = (cells, id) => {
      const tr = el("tr");
      if (id) tr.setAttribute("data-line", id);
      cells.forEach((c, k) => tr.appendChild(el("td", c, k === 1 || k === 2 ? "n" : "")));
      body.appendChild(tr);
    };
    const rss = D.rss[i] || 0;
    let sum = 0;
    const pct = (b) => (rss ? (100 * b / rss).toFixed(1) + "%" : "");
    for (const [name, v] of layers) {
      sum += v[i];
      row([name, human(v[i]), pct(v[i]), actions[name] || ""], name);
    }
    row(["unexplained (RSS less every line)", human(rss - sum), pct(rss - sum), ""], "unexplained");
    const w = walkOf[i];
    row(["malloc's split", w ? "walked " + when(w.at) : "no walk yet", "",
      w ? "stopped the process " + (w.stop_s * 1000).toFixed(1) + " ms, " + (w.cpu_s * 1000).toFixed(0) + " ms of CPU; " +
        human(w.free_not_resident) + " free and not resident; of the pinned, " + human(w.pinned_tops) +
        " at thread arenas' tops, the rest in pieces of pages beside held chunks" : "the heaps' rest is held or free together"], "walk");
    row(["RSS", human(rss), "", "peak in the interval " + human(D.rss_peak[i] || rss)], "rss");
  }

  for (const sel of [$("time-a"), $("time-b")]) {
    D.t.forEach((t, i) => sel.appendChild(el("option", when(t))).setAttribute("value", i));
    sel.addEventListener("change", () => { setDiff(+$("time-a").value, +$("time-b").value); waterfall(+$("time-b").value); });
  }

  // Findings and events, numbered as on the charts.
  D.findings.forEach((f, i) => {
    const li = el("li");
    li.setAttribute("data-id", f.id);
    li.appendChild(el("span", "F" + (i + 1) + " [" + f.severity + "] ", "sev-" + f.severity));
    li.appendChild(el("span", f.title + " — from " + when(f.first) + (f.last !== f.first ? " to " + when(f.last) : "")));
    const ul = el("ul");
    for (const e of f.evidence) ul.appendChild(el("li", e));
    ul.appendChild(el("li", "fix: " + f.fix));
    li.appendChild(ul);
    $("findings").appendChild(li);
  });
  if (!D.findings.length) $("findings").appendChild(el("li", "none"));
  D.events.forEach((e, i) => $("events").appendChild(el("li", "E" + (i + 1) + " " + when(e.t) + " " + e.kind + ": " + e.text)));
  if (!D.events.length) $("events").appendChild(el("li", "none"));
  $("truncated").textContent = D.truncated.join("; ");

  // The initial choice, or the one in the address (#range=I-J&a=I&b=J).
  const q = new URLSearchParams(location.hash.slice(1));
  const rg = (q.get("range") || "").split("-").map(Number);
  setRange(rg.length === 2 ? rg[0] : 0, rg.length === 2 ? rg[1] : n - 1);
  const ia = q.has("a") ? +q.get("a") : 0, ib = q.has("b") ? +q.get("b") : n - 1;
  $("time-a").value = ia; $("time-b").value = ib;
  setDiff(ia, ib);
  waterfall(ib);
  document.body.setAttribute("data-ready", "1");
})();
