/**
 * The web chat page: plain HTML + a little JS, no build step. Assistant text is Markdown,
 * rendered by `marked` and sanitised by DOMPurify (both served by the gateway from
 * node_modules, /assets/*); raw HTML from the model never runs. User text is inserted as text.
 *
 * Frames from the gateway: `hello`, `history` (the session's recent messages, on every open and
 * reconnect), `message` (a new bubble, or the whole text of an existing one by id), `delta`
 * (text appended to a streamed bubble), `typing {on}`, `error`. A `message` with
 * `kind: "failure"` is a failed turn: shown as an error with a retry button.
 */
export function webchatPage(notice?: string): string {
  const escaped = (notice ?? "").replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard chat</title>
<style>
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh;height:100dvh;background:#f6f6f4;color:#1f2933}
header{padding:.6rem 1rem;background:#1f2933;color:#fff;font-weight:600;display:flex;justify-content:space-between;align-items:center;gap:.5rem}
#conn{font-weight:400;font-size:.8rem;padding:.1rem .5rem;border-radius:1rem;background:#52606d}
#conn[data-state=connected]{background:#1a7f37}#conn[data-state=reconnecting]{background:#b54708}
#notice{padding:.5rem 1rem;background:#fff4ce;color:#5c4400;font-size:.9rem}
#notice:empty{display:none}
#log{flex:1;overflow-y:auto;overflow-x:hidden;padding:1rem;display:flex;flex-direction:column;gap:.5rem}
.msg{max-width:min(46rem,88%);min-width:0;padding:.5rem .75rem;border-radius:.6rem;overflow-wrap:anywhere;word-break:break-word}
.user{align-self:flex-end;background:#d8ecff;white-space:pre-wrap}
.assistant{align-self:flex-start;background:#fff;border:1px solid #e2e2e2}
.assistant>:first-child{margin-top:0}.assistant>:last-child{margin-bottom:0}
.assistant pre{position:relative;background:#f3f4f6;border-radius:.4rem;padding:.6rem;overflow-x:auto;max-width:100%}
.assistant pre code{display:block;white-space:pre}
.assistant code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.assistant :not(pre)>code{background:#f3f4f6;padding:.05rem .3rem;border-radius:.25rem}
.assistant table{display:block;overflow-x:auto;max-width:100%;border-collapse:collapse}
.assistant td,.assistant th{border:1px solid #ddd;padding:.2rem .4rem}
.assistant img{max-width:100%}
.copy{position:absolute;top:.3rem;right:.3rem;font:12px system-ui,sans-serif;padding:.15rem .45rem;border:1px solid #ccc;border-radius:.3rem;background:#fff;color:#333;cursor:pointer}
.error{align-self:flex-start;background:#fdecea;border:1px solid #f5c2bd;color:#8a1c12}
.error button{margin-left:.6rem;font:inherit;font-size:.85rem;padding:.15rem .6rem;border:1px solid #8a1c12;border-radius:.3rem;background:#fff;color:#8a1c12;cursor:pointer}
#typing{padding:0 1rem;height:1.2rem;color:#777;font-size:.85rem}
form{display:flex;gap:.5rem;padding:.75rem 1rem;background:#fff;border-top:1px solid #e2e2e2}
input{flex:1;min-width:0;font:inherit;padding:.5rem;border:1px solid #ccc;border-radius:.4rem}
#send{font:inherit;padding:.5rem 1rem;border:0;border-radius:.4rem;background:#1f6feb;color:#fff}
#gate{display:none;margin:auto;max-width:30rem;padding:1.5rem;text-align:center}
body.locked #gate{display:block}body.locked #log,body.locked form,body.locked #typing{display:none}
</style></head><body>
<header><span>Switchboard</span><span id="conn" data-testid="conn" data-state="connecting">connecting…</span></header>
<div id="notice" data-testid="notice">${escaped}</div>
<div id="gate" data-testid="gate"><h2>This chat needs the gateway token</h2><p>Open the URL printed when the gateway started — it ends with <code>#token=…</code>.</p></div>
<div id="log" data-testid="log" aria-live="polite"></div>
<div id="typing" data-testid="typing"></div>
<form id="form"><input id="text" autocomplete="off" placeholder="Message" aria-label="Message"><button id="send" type="submit">Send</button></form>
<script src="/assets/purify.js"></script>
<script src="/assets/marked.js"></script>
<script>
(() => {
  /** The gateway token from the page URL (#token=… or ?token=…); "" when none. */
  function readToken() {
    const m = /(?:^|[#?&])token=([^&]+)/.exec(location.hash) || /(?:^|[?&])token=([^&]+)/.exec(location.search);
    return m ? decodeURIComponent(m[1]) : "";
  }
  const key = "switchboard.visitor";
  let visitor = localStorage.getItem(key);
  if (!visitor) { visitor = (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2) + Date.now()).replace(/[^A-Za-z0-9_-]/g, ""); localStorage.setItem(key, visitor); }
  const token = readToken();
  const $ = (id) => document.getElementById(id);
  const log = $("log"), typing = $("typing"), notice = $("notice"), conn = $("conn");
  const setConn = (state, text) => { conn.dataset.state = state; conn.textContent = text; };
  const bubbles = new Map();
  let lastUserText = "";

  DOMPurify.addHook("afterSanitizeAttributes", (node) => { if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); } });
  const render = (el, text) => {
    el.dataset.text = text;
    el.innerHTML = DOMPurify.sanitize(marked.parse(text, { gfm: true, breaks: true }), { FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"] });
    for (const pre of el.querySelectorAll("pre")) {
      const b = document.createElement("button"); b.type = "button"; b.className = "copy"; b.textContent = "Copy";
      b.onclick = () => { const code = pre.querySelector("code"); navigator.clipboard?.writeText((code || pre).textContent || "").then(() => { b.textContent = "Copied"; setTimeout(() => { b.textContent = "Copy"; }, 1200); }, () => {}); };
      pre.appendChild(b);
    }
  };
  const nearBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  const scroll = (force) => { if (force || nearBottom()) log.scrollTop = log.scrollHeight; };
  const add = (role, text, id) => {
    const stick = nearBottom();
    const d = document.createElement("div"); d.className = "msg " + role; d.dataset.role = role;
    if (role === "assistant") render(d, text); else d.textContent = text;
    if (id) { d.dataset.id = id; bubbles.set(id, d); }
    log.appendChild(d); scroll(stick); return d;
  };
  const addError = (text) => {
    const d = document.createElement("div"); d.className = "msg error"; d.dataset.role = "error"; d.setAttribute("role", "alert");
    d.append(document.createTextNode(text));
    if (lastUserText) { const b = document.createElement("button"); b.type = "button"; b.textContent = "Retry"; b.dataset.testid = "retry"; const again = lastUserText; b.onclick = () => { d.remove(); send(again); }; d.append(b); }
    log.appendChild(d); scroll(true);
  };
  // Streamed text is re-rendered at most once a frame.
  const dirty = new Set(); let raf = 0;
  const flush = () => { raf = 0; const stick = nearBottom(); for (const el of dirty) render(el, el.dataset.raw); dirty.clear(); scroll(stick); };
  const grow = (el, text) => { el.dataset.raw = text; dirty.add(el); if (!raf) raf = requestAnimationFrame(flush); };

  // Buttons under a message (approval requests): a press sends an action frame; [] removes them.
  const buttons = (el, id, actions) => {
    const old = el.nextSibling && el.nextSibling.dataset && el.nextSibling.dataset.actionsFor === id ? el.nextSibling : null;
    if (old) old.remove();
    if (!actions.length) return;
    const row = document.createElement("div"); row.className = "actions"; row.dataset.actionsFor = id;
    for (const a of actions) {
      const b = document.createElement("button"); b.type = "button"; b.textContent = String(a.label); b.dataset.actionId = String(a.id);
      if (a.style) b.className = String(a.style);
      b.onclick = () => { const frame = JSON.stringify({ type: "action", messageId: id, actionId: String(a.id) }); if (ws && ws.readyState === 1) ws.send(frame); else queue.push(frame); };
      row.appendChild(b);
    }
    el.after(row);
  };
  let ws, seq = 0, queue = [], attempt = 0, locked = false;
  const lock = () => { locked = true; document.body.classList.add("locked"); setConn("locked", "token needed"); try { ws && ws.close(); } catch {} };
  const connect = () => {
    if (locked) return;
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/webchat/ws?v=" + encodeURIComponent(visitor) + (token ? "&token=" + encodeURIComponent(token) : ""));
    ws.onopen = () => { attempt = 0; setConn("connected", "connected"); for (const f of queue.splice(0)) ws.send(f); };
    ws.onmessage = (e) => {
      let f; try { f = JSON.parse(e.data); } catch { return; }
      if (f.type === "hello") { if (f.notice) notice.textContent = f.notice; }
      else if (f.type === "history") { log.replaceChildren(); bubbles.clear(); for (const m of f.messages || []) add(m.role, m.text, m.id); scroll(true); }
      else if (f.type === "message") {
        typing.textContent = "";
        if (f.kind === "failure") { addError(f.text); return; }
        const el0 = f.id && bubbles.get(f.id);
        const el = el0 || add("assistant", f.text, f.id);
        if (el0) grow(el0, f.text);
        if (Array.isArray(f.actions)) buttons(el, f.id, f.actions);
      }
      else if (f.type === "notice") { const el = f.id && bubbles.get(f.id); const n = document.createElement("div"); n.className = "notice"; n.dataset.testid = "action-notice"; n.textContent = f.text; if (el) el.after(n); else log.appendChild(n); scroll(true); }
      else if (f.type === "delta") { const el = bubbles.get(f.id); if (el) grow(el, (el.dataset.raw ?? el.dataset.text ?? "") + f.text); }
      else if (f.type === "typing") typing.textContent = f.on === false ? "" : "typing…";
      else if (f.type === "error") { if (f.code === "UNAUTHORIZED") lock(); else addError(f.message); }
    };
    ws.onclose = (e) => {
      if (e.code === 4401 || locked) { lock(); return; }
      const wait = Math.min(10, 2 ** attempt++);
      let left = wait; setConn("reconnecting", "reconnecting in " + left + "s…");
      const tick = setInterval(() => { left--; if (left > 0) setConn("reconnecting", "reconnecting in " + left + "s…"); else { clearInterval(tick); setConn("connecting", "connecting…"); connect(); } }, 1000);
    };
  };
  const send = (text) => {
    lastUserText = text; add("user", text);
    const frame = JSON.stringify({ type: "message", id: Date.now() + "-" + (++seq), text });
    if (ws && ws.readyState === 1) ws.send(frame); else queue.push(frame);
    scroll(true);
  };
  connect();
  $("form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("text"); const text = input.value.trim(); if (!text) return;
    input.value = ""; send(text);
  });
})();
</script>
</body></html>`;
}
