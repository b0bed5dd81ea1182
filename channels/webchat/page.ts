/**
 * The web chat page: plain HTML + a little JS, no build step. Assistant text is Markdown,
 * rendered by `marked` and sanitised by DOMPurify (both served by the gateway from
 * node_modules, /assets/*); raw HTML from the model never runs. User text is inserted as text.
 *
 * Frames from the gateway: `hello`, `history` (the session's recent messages, on every open and
 * reconnect), `message` (a new bubble, or the whole text of an existing one by id), `delta`
 * (text appended to a streamed bubble), `typing {on}`, `error`. A `message` with
 * `kind: "failure"` is a failed turn: shown as an error with a retry button.
 *
 * Files (the file button, drag-and-drop onto the chat, a pasted image) are uploaded with
 * `POST /media` (bearer token) as they are picked, shown as chips, and sent with the next message
 * as `attachments: [{ mediaId, name }]`; the user line shows them (images inline, audio playable,
 * other files as links), as does the history.
 */
import { MEDIA_VIEW_JS } from "../../src/channels/kit/media-view.js";

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
.media{margin-top:.35rem;white-space:normal}.media audio{max-width:100%}.media em{display:block;color:#52606d;font-size:.88em}
#pending{display:flex;flex-wrap:wrap;gap:.35rem;padding:0 1rem}#pending:empty{display:none}
.chip{font-size:.85rem;background:#e6eef8;border:1px solid #bcd;border-radius:1rem;padding:.1rem .55rem}.chip button{border:0;background:none;cursor:pointer;font:inherit;padding:0 0 0 .3rem}
#attach{font:inherit;padding:.5rem .7rem;border:1px solid #ccc;border-radius:.4rem;background:#fff;cursor:pointer}
body.dragging #log{outline:3px dashed #1f6feb;outline-offset:-6px}
#gate{display:none;margin:auto;max-width:30rem;padding:1.5rem;text-align:center}
body.locked #gate{display:block}body.locked #log,body.locked form,body.locked #typing{display:none}
</style></head><body>
<header><span>Switchboard</span><span id="conn" data-testid="conn" data-state="connecting">connecting…</span></header>
<div id="notice" data-testid="notice">${escaped}</div>
<div id="gate" data-testid="gate"><h2>This chat needs the gateway token</h2><p>Open the URL printed when the gateway started — it ends with <code>#token=…</code>.</p></div>
<div id="log" data-testid="log" aria-live="polite"></div>
<div id="typing" data-testid="typing"></div>
<div id="pending" data-testid="pending"></div>
<form id="form"><input id="file" data-testid="file" type="file" multiple hidden aria-label="Attach files"><button id="attach" type="button" title="Attach files">📎</button><input id="text" autocomplete="off" placeholder="Message" aria-label="Message"><button id="send" type="submit">Send</button></form>
<script src="/assets/purify.js"></script>
<script src="/assets/marked.js"></script>
<script>
(() => {
${MEDIA_VIEW_JS}
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
  let lastUserText = "", lastAttachments = [];

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
  const add = (role, text, id, parts) => {
    const stick = nearBottom();
    const d = document.createElement("div"); d.className = "msg " + role; d.dataset.role = role;
    if (role === "assistant") render(d, text); else d.textContent = text;
    if (Array.isArray(parts)) for (const p of parts) if (p && typeof p === "object") d.append(mediaView(p, token));
    if (id) { d.dataset.id = id; bubbles.set(id, d); }
    log.appendChild(d); scroll(stick); return d;
  };
  const addError = (text) => {
    const d = document.createElement("div"); d.className = "msg error"; d.dataset.role = "error"; d.setAttribute("role", "alert");
    d.append(document.createTextNode(text));
    if (lastUserText || lastAttachments.length) { const b = document.createElement("button"); b.type = "button"; b.textContent = "Retry"; b.dataset.testid = "retry"; const again = lastUserText, files = lastAttachments; b.onclick = () => { d.remove(); send(again, files); }; d.append(b); }
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
      else if (f.type === "history") { log.replaceChildren(); bubbles.clear(); for (const m of f.messages || []) add(m.role, m.text, m.id, m.parts); scroll(true); }
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
  // Files: uploaded as they are picked (POST /media), sent with the next message.
  const pendingEl = $("pending"); let pending = [], uploading = 0;
  const showPending = () => {
    pendingEl.replaceChildren();
    for (const a of pending) {
      const c = document.createElement("span"); c.className = "chip"; c.dataset.testid = "attachment"; c.textContent = (a.name || a.type) + " (" + mediaSize(a.bytes) + ")";
      const x = document.createElement("button"); x.type = "button"; x.textContent = "×"; x.title = "Remove"; x.onclick = () => { pending = pending.filter((p) => p !== a); showPending(); };
      c.append(x); pendingEl.append(c);
    }
    if (uploading) { const c = document.createElement("span"); c.className = "chip"; c.textContent = "uploading " + uploading + "…"; pendingEl.append(c); }
  };
  const uploadError = (name, status, body) => {
    const why = status === 413 ? "the file is too large" + (body && body.error && body.error.message ? " — " + String(body.error.message) : "")
      : status === 401 ? "not authorised (open the URL with #token=…)"
      : body && body.error && body.error.message ? String(body.error.message) : status ? "HTTP " + status : "network error";
    const d = document.createElement("div"); d.className = "msg error"; d.dataset.role = "error"; d.dataset.testid = "upload-error"; d.setAttribute("role", "alert");
    d.textContent = "Could not upload " + name + ": " + why;
    log.appendChild(d); scroll(true);
  };
  const upload = async (file) => {
    const name = file.name || (file.type.startsWith("image/") ? "pasted image" : "file");
    uploading++; showPending();
    try {
      const form = new FormData(); form.append("file", file, name);
      const r = await fetch("/media", { method: "POST", body: form, headers: token ? { authorization: "Bearer " + token } : {} });
      let body = null; try { body = await r.json(); } catch {}
      if (r.status === 401) { uploadError(name, 401, body); return; }
      if (!r.ok || !body || typeof body.mediaId !== "string") { uploadError(name, r.status, body); return; }
      const family = String(body.mimeType).split("/")[0];
      const type = family === "image" || family === "audio" || family === "video" ? family : "file";
      pending.push({ type, mediaId: body.mediaId, mimeType: body.mimeType, bytes: body.bytes, name });
    } catch { uploadError(name, 0, null); }
    finally { uploading--; showPending(); }
  };
  const inflight = new Set();
  const uploadAll = (files) => { for (const f of Array.from(files || []).slice(0, 10)) { const p = upload(f); inflight.add(p); p.finally(() => inflight.delete(p)); } };
  $("attach").onclick = () => $("file").click();
  $("file").addEventListener("change", (e) => { uploadAll(e.target.files); e.target.value = ""; });
  let drag = 0;
  document.addEventListener("dragenter", (e) => { if (e.dataTransfer && Array.from(e.dataTransfer.types).includes("Files")) { drag++; document.body.classList.add("dragging"); } });
  document.addEventListener("dragleave", () => { if (drag > 0 && --drag === 0) document.body.classList.remove("dragging"); });
  document.addEventListener("dragover", (e) => { if (e.dataTransfer && Array.from(e.dataTransfer.types).includes("Files")) e.preventDefault(); });
  document.addEventListener("drop", (e) => { drag = 0; document.body.classList.remove("dragging"); if (e.dataTransfer && e.dataTransfer.files.length) { e.preventDefault(); uploadAll(e.dataTransfer.files); } });
  $("text").addEventListener("paste", (e) => {
    const files = Array.from((e.clipboardData && e.clipboardData.files) || []).filter((f) => f.type.startsWith("image/"));
    if (files.length) { e.preventDefault(); uploadAll(files); }
  });

  const send = (text, files) => {
    files = files || [];
    lastUserText = text; lastAttachments = files; add("user", text, undefined, files);
    const frame = JSON.stringify({ type: "message", id: Date.now() + "-" + (++seq), text, ...(files.length ? { attachments: files.map((a) => ({ mediaId: a.mediaId, name: a.name })) } : {}) });
    if (ws && ws.readyState === 1) ws.send(frame); else queue.push(frame);
    scroll(true);
  };
  connect();
  $("form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = $("text");
    // Send waits for the uploads in flight (bounded: each is one request).
    if (inflight.size) await Promise.allSettled(Array.from(inflight));
    const text = input.value.trim();
    if (!text && !pending.length) return;
    const files = pending; pending = []; showPending();
    input.value = ""; send(text, files);
  });
})();
</script>
</body></html>`;
}
