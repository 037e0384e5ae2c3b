// dfg's graph viewer (see graphdef/viewer.py): pan, zoom, open/close scopes, search,
// details. Our own code; the page is self-contained and makes no network request.
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const svg = document.getElementById("svg"), world = document.getElementById("world");
const open = new Set();
let view = {x: 0, y: 0, w: 100, h: 100};

function setView() { svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`); }
function fit() {
  const b = world.getBBox();
  const r = svg.getBoundingClientRect();
  const pad = 20, k = Math.max((b.width + 2 * pad) / Math.max(r.width, 1),
                               (b.height + 2 * pad) / Math.max(r.height, 1));
  view = {w: r.width * k, h: r.height * k, x: 0, y: 0};
  view.x = b.x - (view.w - b.width) / 2; view.y = b.y - (view.h - b.height) / 2;
  setView();
}
function parse(text) {
  const doc = new DOMParser().parseFromString(
    `<svg xmlns="${NS}">${text}</svg>`, "image/svg+xml");
  return document.importNode(doc.documentElement.firstElementChild, true);
}
function box(el) {
  const shape = el.querySelector("polygon,path,ellipse");
  return (shape || el).getBBox();
}
function openScope(sid) {
  if (open.has(sid)) return true;
  const el = world.querySelector(`g[data-key="${sid}"]`);
  const sc = D.scopes[sid];
  if (!el || !sc) return false;
  const b = box(el), pad = 4;
  const k = Math.min((b.width - 2 * pad) / sc.w, (b.height - 2 * pad) / sc.h);
  const g = parse(sc.svg);
  const x = b.x + (b.width - sc.w * k) / 2, y = b.y + (b.height - sc.h * k) / 2;
  const wrap = document.createElementNS(NS, "g");
  wrap.setAttribute("transform", `translate(${x} ${y}) scale(${k})`);
  wrap.setAttribute("data-inside", sid);
  wrap.appendChild(g);
  el.classList.add("open");
  el.parentNode.insertBefore(wrap, el.nextSibling);
  open.add(sid);
  status();
  return true;
}
function closeScope(sid) {
  const wrap = world.querySelector(`g[data-inside="${sid}"]`);
  if (wrap) {
    wrap.querySelectorAll("g[data-inside]").forEach(w => open.delete(w.getAttribute("data-inside")));
    wrap.remove();
  }
  const el = world.querySelector(`g[data-key="${sid}"]`);
  if (el) el.classList.remove("open");
  open.delete(sid);
  status();
}
function status() {
  document.getElementById("status").textContent =
    `${D.count} nodes; ${open.size} boxes open; ${world.querySelectorAll("g.op").length} nodes drawn`;
}
function zoomTo(el) {
  // the view onto an element, with a margin: an opened box fills the screen
  const r = el.getBoundingClientRect(), c = svg.getBoundingClientRect();
  const k = view.w / c.width;
  const x = view.x + (r.left - c.left) * k, y = view.y + (r.top - c.top) * k;
  const w = r.width * k * 1.15, h = r.height * k * 1.15;
  const z = Math.max(w / c.width, h / c.height);
  view = {w: c.width * z, h: c.height * z, x: 0, y: 0};
  view.x = x + r.width * k / 2 - view.w / 2;
  view.y = y + r.height * k / 2 - view.h / 2;
  setView();
}
function ancestors(sid) {
  const out = [];
  while (sid && sid !== D.root) { out.unshift(sid); sid = D.scopes[sid].parent; }
  return out;
}
function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}
function row(k, v) { return `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`; }
function showNode(id) {
  const n = D.nodes[id];
  let h = `<h3>${esc(n.name)}</h3><table>${row("op", n.op)}`;
  if (n.device) h += row("device", n.device);
  if (n.value) h += row("value", n.value);
  if (n.share !== undefined) h += row("time", (100 * n.share).toFixed(1) + "%");
  if (n.diff) h += row("diff", n.diff);
  h += "</table><h4>inputs</h4><table>";
  n.inputs.forEach(i => { h += row(i.name, [i.dtype || "?", i.shape || "", i.value || ""].join(" ")); });
  n.control.forEach(c => { h += row("^" + c, "control"); });
  h += "</table><h4>outputs</h4><table>";
  n.outputs.forEach((o, k) => { h += row(":" + k, `${o.dtype} ${o.shape || ""}`); });
  h += "</table><h4>attributes</h4><table>";
  for (const [k, v] of Object.entries(n.attrs)) h += row(k, typeof v === "string" ? v : JSON.stringify(v));
  document.getElementById("panel").innerHTML = h + "</table>";
}
function showScope(sid) {
  const s = D.scopes[sid];
  let h = `<h3>${esc(s.path)}/</h3><table>${row("nodes", s.members)}`;
  for (const [op, c] of Object.entries(s.ops)) h += row(op, c);
  document.getElementById("panel").innerHTML = h + "</table>";
}
function select(el) {
  world.querySelectorAll("g.sel").forEach(e => e.classList.remove("sel"));
  if (el) el.classList.add("sel");
}
function reveal(id) {
  const n = D.nodes[id];
  ancestors(n.scope).forEach(openScope);
  let el = world.querySelector(`g[data-key="${id}"]`);
  if (!el) el = world.querySelector(`g[data-key="${n.scope}"]`);   // a constant: its scope
  world.querySelectorAll("g.hit").forEach(e => e.classList.remove("hit"));
  if (!el) return null;
  el.classList.add("hit");
  showNode(id);
  const r = el.getBoundingClientRect(), c = svg.getBoundingClientRect();
  const k = view.w / c.width;
  view.x += (r.left + r.width / 2 - c.left - c.width / 2) * k;
  view.y += (r.top + r.height / 2 - c.top - c.height / 2) * k;
  // zoom so that the node is readable
  const want = Math.max(r.width * k * 16, 1);
  if (view.w > want) { const z = want / view.w; const cx = view.x + view.w / 2, cy = view.y + view.h / 2;
    view.w *= z; view.h *= z; view.x = cx - view.w / 2; view.y = cy - view.h / 2; }
  setView();
  return el;
}
const ids = Object.keys(D.nodes);
function search(q) {
  const hits = document.getElementById("hits");
  q = q.trim().toLowerCase();
  if (!q) { hits.style.display = "none"; return []; }
  const found = [];
  for (const id of ids) {
    const n = D.nodes[id];
    if (n.name.toLowerCase().includes(q) || n.op.toLowerCase() === q) { found.push(id); if (found.length >= 50) break; }
  }
  hits.innerHTML = found.map(id => `<div data-id="${id}">${esc(D.nodes[id].name)} <i>${esc(D.nodes[id].op)}</i></div>`).join("");
  hits.style.display = found.length ? "block" : "none";
  return found;
}
document.getElementById("search").addEventListener("input", e => search(e.target.value));
document.getElementById("search").addEventListener("keydown", e => {
  if (e.key === "Enter") { const f = search(e.target.value); if (f.length) reveal(f[0]);
    document.getElementById("hits").style.display = "none"; }
});
document.getElementById("hits").addEventListener("click", e => {
  const d = e.target.closest("div[data-id]");
  if (d) { reveal(d.getAttribute("data-id")); document.getElementById("hits").style.display = "none"; }
});
document.getElementById("fit").addEventListener("click", fit);
document.getElementById("collapse").addEventListener("click", () => {
  Array.from(open).forEach(closeScope); fit(); });
let drag = null, moved = false;
svg.addEventListener("mousedown", e => { drag = {x: e.clientX, y: e.clientY}; moved = false; });
window.addEventListener("mousemove", e => {
  if (!drag) return;
  const k = view.w / svg.getBoundingClientRect().width;
  if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 2) moved = true;
  view.x -= (e.clientX - drag.x) * k; view.y -= (e.clientY - drag.y) * k;
  drag = {x: e.clientX, y: e.clientY}; setView();
});
window.addEventListener("mouseup", () => { drag = null; });
svg.addEventListener("wheel", e => {
  e.preventDefault();
  const r = svg.getBoundingClientRect();
  const z = Math.exp(e.deltaY * 0.0015);
  const px = view.x + (e.clientX - r.left) / r.width * view.w;
  const py = view.y + (e.clientY - r.top) / r.height * view.h;
  view.w *= z; view.h *= z;
  view.x = px - (e.clientX - r.left) / r.width * view.w;
  view.y = py - (e.clientY - r.top) / r.height * view.h;
  setView();
}, {passive: false});
svg.addEventListener("click", e => {
  if (moved) return;
  const el = e.target.closest("g[data-key]");
  if (!el) return;
  const key = el.getAttribute("data-key");
  select(el);
  if (key.startsWith("s")) {
    if (open.has(key)) closeScope(key); else { openScope(key); zoomTo(el); }
    showScope(key);
  } else showNode(key);
});
// the graph's own level, then its boxes opened while few are drawn: collapsed scopes
// first, so a big graph starts small
world.appendChild(parse(D.scopes[D.root].svg));
for (let round = 0; round < 3; round++) {
  const shut = Array.from(world.querySelectorAll("g.scope:not(.open)"));
  const drawn = world.querySelectorAll("g.op").length + shut.length;
  if (!shut.length || drawn > 12) break;
  shut.forEach(el => openScope(el.getAttribute("data-key")));
}
status();
fit();
window.dfgViewer = {openScope, closeScope, reveal, search, open};
