import { MEDIA_VIEW_JS } from "../channels/kit/media-view.js";

/**
 * The operator dashboard at `/dashboard`: the sessions tree by lineage (`spawnedBy`) with status,
 * model, tokens, cost and last activity; per session its run timeline, transcript (newest at the
 * bottom) and actions — kill/steer a sub-agent (`tools.invoke` → `subagents` as its parent),
 * `/send on|off|inherit` (`sessions.patch`), reset (`sessions.reset`) — each confirmed first and
 * sent over the same `/ws` RPC the CLI uses. Pending approvals (API.md §8.3) with the chat's three
 * buttons (`approvals.resolve`), refreshed on `approval.requested` / `approval.resolved`. Live over
 * `/ws` events. Text is inserted as text (tool arguments come from a model).
 * With a gateway token, open it as `/dashboard#token=<token>`. A user line's media parts show as
 * the web chat shows them (images inline, audio playable, files as links; src/channels/kit/media-view.ts).
 */
export function dashboardPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard dashboard</title>
<style>
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0;display:grid;grid-template-columns:minmax(16rem,30rem) minmax(0,1fr);grid-template-rows:auto minmax(0,1fr);height:100vh;height:100dvh;background:#f6f6f4;color:#1f2933}
header{grid-column:1/3;padding:.5rem 1rem;background:#1f2933;color:#fff;display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center}
header b{font-size:1rem}#status{opacity:.85;font-size:.8rem;min-width:0;overflow-wrap:anywhere}
#filter{margin-left:auto;min-width:0;width:14rem;max-width:100%;font:inherit;padding:.25rem .5rem;border-radius:.3rem;border:0}
aside{overflow:auto;border-right:1px solid #ddd;background:#fff;min-width:0}
main{overflow:auto;padding:1rem;min-width:0}
h2{font-size:.75rem;text-transform:uppercase;letter-spacing:.05em;color:#666;margin:1rem 1rem .3rem}
h3{margin:.2rem 0 .5rem;font-size:1rem;overflow-wrap:anywhere}
ul{list-style:none;margin:0;padding:0}li ul{padding-left:.9rem;border-left:1px dashed #ccc;margin-left:.6rem}
.row{padding:.35rem .8rem;cursor:pointer;display:flex;flex-direction:column;gap:.1rem;min-width:0}
.row:hover,.row.sel{background:#eef4ff}
.key{font-family:ui-monospace,monospace;font-size:.8rem;overflow-wrap:anywhere}
.label{font-weight:600}
.meta{color:#667;font-size:.75rem;overflow-wrap:anywhere}
.badge{display:inline-block;font-size:.7rem;padding:0 .35rem;border-radius:.6rem;background:#e4e7eb;color:#333;margin-right:.25rem}
.s-running{background:#dbeafe;color:#1e40af}.s-ok{background:#dcfce7;color:#166534}.s-error,.s-timeout,.s-aborted{background:#fee2e2;color:#991b1b}
.card{background:#fff;border:1px solid #e2e2e2;border-radius:.5rem;padding:.7rem .9rem;margin-bottom:.8rem;min-width:0}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15rem .8rem;margin:0}dt{color:#667}dd{margin:0;overflow-wrap:anywhere}
.actions{display:flex;flex-wrap:wrap;gap:.4rem;margin-top:.6rem}
.actions button{font:inherit;font-size:.85rem;padding:.25rem .6rem;border:1px solid #c5ccd3;border-radius:.3rem;background:#fff;cursor:pointer}
.actions button.danger{border-color:#d92d20;color:#b42318}
#notice{margin:.5rem 0;font-size:.85rem}#notice.err{color:#b42318}#notice.ok{color:#1a7f37}
.run{display:flex;flex-wrap:wrap;gap:.2rem .6rem;padding:.2rem 0;border-bottom:1px solid #f0f0f0;font-size:.8rem;min-width:0}
.run .err{color:#b42318;overflow-wrap:anywhere;flex-basis:100%}
#transcript{max-height:60vh;overflow:auto}
.msg{background:#fafafa;border:1px solid #eee;border-radius:.4rem;padding:.4rem .6rem;margin:.4rem 0;white-space:pre-wrap;overflow-wrap:anywhere;min-width:0}
.msg .role{font-size:.72rem;color:#667;display:block;margin-bottom:.15rem}
.msg pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.4 ui-monospace,monospace}
.live{border-style:dashed;color:#334}
.ap{padding:.45rem .8rem;border-bottom:1px solid #eee;display:flex;flex-direction:column;gap:.15rem;min-width:0}
.ap pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.4 ui-monospace,monospace;max-height:6rem;overflow:auto;background:#fafafa;padding:.2rem .3rem;border-radius:.25rem}
.ap .actions{margin-top:.3rem}.ap .err{color:#b42318;font-size:.75rem}
#gate{display:none;grid-column:1/3;margin:3rem auto;max-width:32rem;padding:1rem;text-align:center}
body.locked #gate{display:block}body.locked aside,body.locked main{display:none}
@media (max-width:760px){body{display:block;height:auto}aside{border-right:0;border-bottom:1px solid #ddd;max-height:45vh}#filter{margin-left:0;width:100%}#transcript{max-height:none}}
</style></head><body>
<header><b>Switchboard</b><a href="/dashboard/usage" data-panel style="color:#cfe1ff">spend</a><a href="/dashboard/cron" data-panel style="color:#cfe1ff">cron</a><span id="status" data-testid="status">connecting…</span><input id="filter" data-testid="filter" placeholder="Filter sessions" aria-label="Filter sessions"></header>
<div id="gate" data-testid="gate"><h2>The dashboard needs the gateway token</h2><p>Open the URL printed when the gateway started, with <code>/dashboard#token=…</code>.</p></div>
<aside><h2>Pending approvals</h2><div id="approvals" data-testid="approvals"><div class="meta ap">None.</div></div><h2>Sessions</h2><ul id="tree" data-testid="tree"></ul><h2>Live runs</h2><div id="runs" data-testid="runs"></div></aside>
<main><div id="detail" data-testid="detail">Select a session.</div></main>
<script>
(() => {
${MEDIA_VIEW_JS}
  /** The gateway token from the page URL (#token=… or ?token=…); "" when none. */
  function readToken() {
    const m = /(?:^|[#?&])token=([^&]+)/.exec(location.hash) || /(?:^|[?&])token=([^&]+)/.exec(location.search);
    return m ? decodeURIComponent(m[1]) : "";
  }
  const token = readToken();
  // the panels take the token along
  if (token) for (const a of document.querySelectorAll("a[data-panel]")) a.href = a.getAttribute("href") + "#token=" + encodeURIComponent(token);
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  let ws, seq = 0, selected = null, rows = [], locked = false, attempt = 0; const pending = new Map(); const live = new Map();
  const call = (method, params) => new Promise((resolve, reject) => { if (!ws || ws.readyState !== 1) return reject({ code: "UNAVAILABLE", message: "not connected" }); const id = ++seq; pending.set(id, { resolve, reject }); ws.send(JSON.stringify({ id, method, params })); });
  const statusEl = document.getElementById("status"), filter = document.getElementById("filter");
  const ago = (ms) => { if (!ms) return "–"; const s = Math.max(0, Math.round((Date.now() - ms) / 1000)); return s < 60 ? s + "s ago" : s < 3600 ? Math.round(s / 60) + "m ago" : s < 86400 ? Math.round(s / 3600) + "h ago" : Math.round(s / 86400) + "d ago"; };
  const dur = (ms) => ms === undefined ? "…" : ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
  const cost = (c) => c ? "$" + c.toFixed(4) : "$0";
  const tok = (n) => n >= 1000 ? (n / 1000).toFixed(1) + "k" : String(n || 0);
  const badge = (status) => el("span", "badge s-" + status, status);

  async function loadTree() {
    const r = await call("dashboard.sessions", { limit: 200 });
    rows = r.sessions; renderTree();
    if (selected) { const s = rows.find((x) => x.key === selected); if (s) renderCard(s); }
  }
  function renderTree() {
    const q = filter.value.trim().toLowerCase();
    const match = (s) => !q || [s.key, s.label, s.displayName, s.task, s.channel, s.kind, s.status, s.model].some((v) => v && String(v).toLowerCase().includes(q));
    const byKey = new Map(rows.map((s) => [s.key, s])); const kids = new Map();
    for (const s of rows) { const p = s.spawnedBy && byKey.has(s.spawnedBy) ? s.spawnedBy : ""; if (!kids.has(p)) kids.set(p, []); kids.get(p).push(s); }
    const visible = (s) => match(s) || (kids.get(s.key) || []).some(visible);
    const build = (parent) => { const ul = el("ul"); for (const s of kids.get(parent) || []) { if (!visible(s)) continue;
      const li = el("li"); const row = el("div", "row" + (s.key === selected ? " sel" : "")); row.dataset.key = s.key; row.dataset.testid = "session-row";
      const top = el("div"); top.append(badge(s.status)); if (s.label) top.append(el("span", "label", s.label + " ")); top.append(el("span", "key", s.key)); row.append(top);
      row.append(el("span", "meta", [s.kind, s.channel, s.model || s.lastModel || "default model", tok(s.tokens) + " tok", cost(s.costUsd), ago(s.updatedAt)].join(" · ")));
      if (s.task) row.append(el("span", "meta", "task: " + s.task));
      row.onclick = () => show(s.key); li.append(row); if (kids.has(s.key)) li.append(build(s.key)); ul.append(li); } return ul; };
    document.getElementById("tree").replaceChildren(...build("").childNodes);
  }
  filter.addEventListener("input", renderTree);

  function notice(text, ok) { const n = document.getElementById("notice"); if (n) { n.textContent = text; n.className = ok ? "ok" : "err"; } }
  /** Runs one action after the operator confirmed it (a prompt's answer counts as confirmation). */
  async function act(what, method, params, confirmed) {
    if (!confirmed && !confirm(what + "?")) return;
    try {
      const r = await call(method, params);
      // A tool answers its own refusals as results (status "error" / "forbidden").
      if (r && (r.status === "error" || r.status === "forbidden")) { notice(what + " failed — " + (r.error || r.status)); return; }
      notice(what + ": done" + (r && r.message ? " (" + r.message + ")" : ""), true); loadTree(); if (selected) show(selected);
    }
    catch (e) { notice(what + " failed — " + (e.code || "") + ": " + (e.message || e)); }
  }
  function renderCard(s) {
    const card = document.getElementById("card"); if (!card) return;
    const dl = el("dl"); const add = (k, v) => { dl.append(el("dt", "", k), el("dd", "", v)); };
    add("status", s.status); if (s.label) add("label", s.label); add("kind", s.kind); add("channel", s.channel); add("agent", s.agentId);
    add("model", s.model || s.lastModel || "default"); add("tokens", tok(s.inputTokens) + " in / " + tok(s.outputTokens) + " out"); add("cost", cost(s.costUsd));
    add("last activity", ago(s.updatedAt)); add("send policy", s.sendPolicy || "inherit");
    if (s.spawnedBy) add("parent", s.spawnedBy); if (s.task) add("task", s.task);
    if (s.lastRun && s.lastRun.error) add("last error", s.lastRun.error);
    const actions = el("div", "actions"); actions.dataset.testid = "actions";
    const btn = (label, fn, cls) => { const b = el("button", cls || "", label); b.type = "button"; b.onclick = fn; actions.append(b); };
    if (s.spawnedBy) {
      btn("Kill", () => act("Kill " + s.key, "tools.invoke", { sessionKey: s.spawnedBy, tool: "subagents", args: { action: "kill", target: s.key } }), "danger");
      btn("Steer", () => { const m = prompt("Steering message for " + (s.label || s.key)); if (m) act("Steer " + s.key, "tools.invoke", { sessionKey: s.spawnedBy, tool: "subagents", args: { action: "steer", target: s.key, message: m } }, true); });
    }
    btn("Send on", () => act("/send on for " + s.key, "sessions.patch", { sessionKey: s.key, patch: { sendPolicy: "allow" } }));
    btn("Send off", () => act("/send off for " + s.key, "sessions.patch", { sessionKey: s.key, patch: { sendPolicy: "deny" } }));
    btn("Send inherit", () => act("/send inherit for " + s.key, "sessions.patch", { sessionKey: s.key, patch: { sendPolicy: null } }));
    btn("Reset", () => act("Reset " + s.key, "sessions.reset", { sessionKey: s.key }), "danger");
    card.replaceChildren(el("h3", "key", s.label ? s.label + " — " + s.key : s.key), dl, actions);
  }
  const pretty = (v) => { if (typeof v === "string") { try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; } } return JSON.stringify(v, null, 2); };
  function msgBox(m) {
    const box = el("div", "msg"); box.dataset.role = m.role;
    box.append(el("span", "role", m.role + (m.toolName ? " · " + m.toolName : "") + (m.timestamp ? " · " + new Date(m.timestamp).toLocaleTimeString() : "")));
    if (m.role === "toolCall") { const args = m.content && typeof m.content === "object" && "arguments" in m.content ? m.content.arguments : m.content; box.append(el("pre", "", pretty(args))); }
    else if (m.role === "toolResult") box.append(el("pre", "", pretty(m.content)));
    else if (Array.isArray(m.content) && m.content.every((p) => p && typeof p === "object" && typeof p.type === "string")) {
      // a line with media (API.md §8.1): its text, then each part shown (images inline, audio playable, files linked)
      for (const p of m.content) { if (p.type === "text") box.append(document.createTextNode(String(p.text ?? ""))); else box.append(mediaView(p, token)); }
    }
    else box.append(document.createTextNode(typeof m.content === "string" ? m.content : pretty(m.content)));
    return box;
  }
  async function show(key) {
    selected = key; const d = document.getElementById("detail");
    const card = Object.assign(el("div", "card"), { id: "card" }); card.dataset.testid = "card";
    const timeline = Object.assign(el("div", "card"), { id: "timeline" }); timeline.dataset.testid = "timeline";
    const tr = Object.assign(el("div", "card"), { id: "transcript" }); tr.dataset.testid = "transcript";
    const old = document.getElementById("notice");
    const note = Object.assign(el("div"), { id: "notice" }); note.dataset.testid = "notice"; note.setAttribute("role", "status");
    if (old && old.dataset.key === key) { note.textContent = old.textContent; note.className = old.className; }
    note.dataset.key = key;
    d.replaceChildren(card, note, timeline, tr);
    renderTree(); const s = rows.find((x) => x.key === key); if (s) renderCard(s);
    const [runs, h] = await Promise.all([call("dashboard.runs", { sessionKey: key, limit: 20 }), call("sessions.history", { sessionKey: key, limit: 100, includeTools: true })]);
    timeline.replaceChildren(el("h3", "", "Runs"));
    for (const r of runs.runs) { const row = el("div", "run"); row.dataset.testid = "run";
      row.append(badge(r.status), el("span", "", new Date(r.startedAt || r.createdAt).toLocaleTimeString()), el("span", "", dur(r.durationMs)), el("span", "meta", (r.origin || "") + (r.tokens ? " · " + tok(r.tokens) + " tok" : "") + (r.cost ? " · " + cost(r.cost) : "")));
      if (r.error) row.append(el("span", "err", r.error)); timeline.append(row); }
    if (!runs.runs.length) timeline.append(el("div", "meta", "No runs yet."));
    tr.replaceChildren(el("h3", "", "Transcript"));
    for (const m of h.messages) tr.append(msgBox(m));
    tr.scrollTop = tr.scrollHeight;
  }
  function renderRuns() {
    const box = document.getElementById("runs"); box.replaceChildren();
    for (const r of [...live.values()].slice(-30).reverse()) { const row = el("div", "run"); row.append(badge(r.status), el("span", "key", r.sessionKey), el("span", "", dur(r.durationMs))); if (r.error) row.append(el("span", "err", r.error)); box.append(row); }
  }
  /** A model's arguments as one bounded line of JSON (inserted as text, never as HTML). */
  const summary = (v) => { let s; try { s = JSON.stringify(v); } catch { s = String(v); } s = s === undefined ? "" : s; return s.length > 300 ? s.slice(0, 299) + "…" : s; };
  const clock = (ms) => typeof ms === "number" ? new Date(ms).toLocaleTimeString() : "–";
  const DECISIONS = [["Allow once", "allow-once", ""], ["Allow always", "allow-always", ""], ["Deny", "deny", "danger"]];
  async function loadApprovals() {
    const r = await call("approvals.list", {});
    const box = document.getElementById("approvals"); const list = Array.isArray(r && r.approvals) ? r.approvals : [];
    if (!list.length) { box.replaceChildren(el("div", "meta ap", "None.")); return; }
    box.replaceChildren(...list.map((a) => {
      const row = el("div", "ap"); row.dataset.testid = "approval"; row.dataset.id = String(a.id);
      row.append(el("span", "label key", String(a.tool)), el("pre", "", summary(a.args)));
      const sess = el("span", "meta key", "session " + a.sessionKey); sess.style.cursor = "pointer"; sess.onclick = () => show(String(a.sessionKey)).catch(() => {}); row.append(sess);
      row.append(el("span", "meta", "requested " + clock(a.requestedAt) + " · expires " + clock(a.expiresAt) + " · " + String(a.id)));
      const actions = el("div", "actions"); const err = el("span", "err"); err.setAttribute("role", "status");
      for (const [label, decision, cls] of DECISIONS) { const b = el("button", cls, label); b.type = "button"; b.dataset.decision = decision;
        b.onclick = async () => { for (const x of actions.querySelectorAll("button")) x.disabled = true;
          try { await call("approvals.resolve", { id: a.id, decision }); } catch (e) { err.textContent = label + " failed — " + (e.code || "") + ": " + (e.message || e); for (const x of actions.querySelectorAll("button")) x.disabled = false; }
          loadApprovals().catch(() => {}); };
        actions.append(b); }
      row.append(actions, err); return row; }));
  }
  let apRefresh = null;
  const approvalsSoon = () => { clearTimeout(apRefresh); apRefresh = setTimeout(() => { loadApprovals().catch(() => {}); }, 100); };
  let refresh = null;
  const soon = () => { clearTimeout(refresh); refresh = setTimeout(() => { loadTree().catch(() => {}); }, 250); };
  const lock = () => { locked = true; document.body.classList.add("locked"); statusEl.textContent = "token needed"; };
  const connect = () => {
    if (locked) return;
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws" + (token ? "?token=" + encodeURIComponent(token) : ""));
    // Many gateways (API.md §8.5): which gateway holds each leased account ("here" = this one).
    function holders(channels) { const out = []; for (const [name, c] of Object.entries(channels || {})) { for (const [id, a] of Object.entries((c && c.accounts) || {})) { if (a.lease) out.push(name + "/" + id + ": " + (a.lease === "held" ? "held here (" + a.heldBy + ")" : "held by " + (a.heldBy || "nobody yet"))); } } return out.length ? " · " + out.join(" · ") : ""; }
    ws.onopen = async () => { attempt = 0; statusEl.textContent = "connected"; try { const h = await call("health", {}); statusEl.textContent = "connected · storage " + h.storage + " · queue " + h.queue + holders(h.channels); } catch {} loadTree().catch(() => {}); loadApprovals().catch(() => {}); if (selected) show(selected).catch(() => {}); };
    ws.onmessage = (e) => { const f = JSON.parse(e.data);
      if (f.event) {
        const d = f.data;
        if (f.event === "run.started" || f.event === "run.finished") { const r = d.run; live.set(r.runId, { runId: r.runId, sessionKey: r.sessionKey, status: f.event === "run.started" ? "running" : r.status, error: r.error, durationMs: r.endedAt && r.startedAt ? r.endedAt - r.startedAt : undefined }); renderRuns(); soon(); if (selected === r.sessionKey && f.event === "run.finished") show(selected).catch(() => {}); }
        else if (f.event === "session.updated") soon();
        else if (f.event === "approval.requested" || f.event === "approval.resolved") approvalsSoon();
        else if (f.event === "message.appended" && d.sessionKey === selected) { const tr = document.getElementById("transcript"); if (tr) { tr.querySelector(".live")?.remove(); tr.append(msgBox(d.message)); tr.scrollTop = tr.scrollHeight; } }
        else if (f.event === "run.delta" && d.sessionKey === selected) { const tr = document.getElementById("transcript"); if (tr) { let lv = tr.querySelector(".live"); if (!lv || d.reset) { lv?.remove(); lv = el("div", "msg live"); lv.append(el("span", "role", "assistant · streaming")); tr.append(lv); } lv.append(document.createTextNode(d.text)); tr.scrollTop = tr.scrollHeight; } }
        return; }
      if (f.id === null && f.error && f.error.code === "UNAUTHORIZED") { lock(); return; }
      const p = pending.get(f.id); if (!p) return; pending.delete(f.id); if (f.ok) p.resolve(f.result); else p.reject(f.error); };
    ws.onclose = (e) => { for (const p of pending.values()) p.reject({ code: "UNAVAILABLE", message: "connection closed" }); pending.clear();
      if (e.code === 4401 || locked) { lock(); return; }
      const wait = Math.min(10, 2 ** attempt++); statusEl.textContent = "disconnected; reconnecting in " + wait + "s…"; setTimeout(connect, wait * 1000); };
  };
  connect();
})();
</script>
</body></html>`;
}
