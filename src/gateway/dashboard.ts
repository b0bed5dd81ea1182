/**
 * The operator dashboard at `/dashboard`: the sessions tree (by `spawnedBy`), a session's
 * transcript, and live runs. Plain HTML + JS over the same `/ws` RPC and events (with
 * `gateway.auth.token` set, open it as `/dashboard#token=<token>`). Text is inserted as text.
 */
export function dashboardPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard dashboard</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;display:grid;grid-template-columns:minmax(18rem,28rem) 1fr;grid-template-rows:auto 1fr;height:100vh;background:#f6f6f4}
header{grid-column:1/3;padding:.5rem 1rem;background:#1f2933;color:#fff;display:flex;gap:1rem;align-items:center}
header b{font-size:1rem}#status{opacity:.8;font-size:.85rem}
aside{overflow:auto;border-right:1px solid #ddd;background:#fff}
main{overflow:auto;padding:1rem}
h2{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#666;margin:1rem 1rem .3rem}
ul{list-style:none;margin:0;padding:0}li ul{padding-left:1.1rem;border-left:1px dashed #ccc;margin-left:.6rem}
.row{padding:.3rem 1rem;cursor:pointer;display:flex;justify-content:space-between;gap:.5rem}
.row:hover,.row.sel{background:#eef4ff}.key{font-family:ui-monospace,monospace;font-size:.8rem;word-break:break-all}
.meta{color:#777;font-size:.75rem;white-space:nowrap}
.run{padding:.25rem 1rem;font-family:ui-monospace,monospace;font-size:.8rem}
.running{color:#1f6feb}.ok{color:#1a7f37}.error,.timeout,.aborted{color:#b42318}
.msg{background:#fff;border:1px solid #e2e2e2;border-radius:.4rem;padding:.4rem .6rem;margin:.4rem 0;white-space:pre-wrap;word-wrap:break-word}
.msg .role{font-size:.75rem;color:#666;display:block}
</style></head><body>
<header><b>Switchboard</b><span id="status">connecting…</span></header>
<aside><h2>Sessions</h2><ul id="tree" data-testid="tree"></ul><h2>Live runs</h2><div id="runs" data-testid="runs"></div></aside>
<main><div id="detail" data-testid="detail">Select a session.</div></main>
<script>
(() => {
  const m = /token=([^&]+)/.exec(location.hash); const token = m ? "?token=" + encodeURIComponent(decodeURIComponent(m[1])) : "";
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  let ws, seq = 0, selected = null; const pending = new Map(); const runs = new Map();
  const call = (method, params) => new Promise((resolve, reject) => { const id = ++seq; pending.set(id, { resolve, reject }); ws.send(JSON.stringify({ id, method, params })); });
  const statusEl = document.getElementById("status");
  async function loadTree() {
    const r = await call("sessions.list", { limit: 200 });
    const rows = r.sessions; const byKey = new Map(rows.map((s) => [s.key, s])); const kids = new Map();
    for (const s of rows) { const p = s.spawnedBy && byKey.has(s.spawnedBy) ? s.spawnedBy : ""; if (!kids.has(p)) kids.set(p, []); kids.get(p).push(s); }
    const build = (parent) => { const ul = el("ul"); for (const s of kids.get(parent) || []) {
      const li = el("li"); const row = el("div", "row" + (s.key === selected ? " sel" : ""));
      row.dataset.key = s.key; row.append(el("span", "key", s.label ? s.key + "  [" + s.label + "]" : s.key), el("span", "meta", s.kind + " · " + s.channel));
      row.onclick = () => show(s.key); li.append(row); if (kids.has(s.key)) li.append(build(s.key)); ul.append(li); } return ul; };
    const tree = document.getElementById("tree"); tree.replaceChildren(...build("").childNodes);
  }
  async function show(key) {
    selected = key; const d = document.getElementById("detail"); d.replaceChildren(el("h3", "key", key));
    const h = await call("sessions.history", { sessionKey: key, limit: 100, includeTools: true });
    for (const msg of h.messages) { const box = el("div", "msg"); box.append(el("span", "role", msg.role + (msg.toolName ? " · " + msg.toolName : "")), document.createTextNode(typeof msg.content === "string" ? msg.content : JSON.stringify(msg.content))); d.append(box); }
    loadTree();
  }
  function renderRuns() {
    const box = document.getElementById("runs"); box.replaceChildren();
    for (const r of [...runs.values()].slice(-30).reverse()) box.append(el("div", "run " + r.status, r.status + "  " + r.sessionKey + "  " + r.runId.slice(0, 8)));
  }
  let refresh = null;
  const soon = () => { clearTimeout(refresh); refresh = setTimeout(() => { loadTree(); if (selected) show(selected); }, 300); };
  const connect = () => {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws" + token);
    ws.onopen = async () => { statusEl.textContent = "connected"; const h = await call("health", {}); statusEl.textContent = "storage " + h.storage + " · queue " + h.queue + " · model " + h.model; loadTree(); };
    ws.onmessage = (e) => { const f = JSON.parse(e.data);
      if (f.event) { if (f.event === "run.started" || f.event === "run.finished") { const r = f.data.run; runs.set(r.runId, { runId: r.runId, sessionKey: r.sessionKey, status: f.event === "run.started" ? "running" : r.status }); renderRuns(); }
        if (f.event === "session.updated" || f.event === "run.finished") soon(); return; }
      const p = pending.get(f.id); if (!p) return; pending.delete(f.id); if (f.ok) p.resolve(f.result); else { statusEl.textContent = f.error.code + ": " + f.error.message; p.reject(f.error); } };
    ws.onclose = () => { statusEl.textContent = "disconnected; retrying…"; setTimeout(connect, 1500); };
  };
  connect();
})();
</script>
</body></html>`;
}
