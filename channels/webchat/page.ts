/** The web chat page: plain HTML + a little JS, no build step. Text is inserted as text, never HTML. */
export function webchatPage(notice?: string): string {
  const escaped = (notice ?? "").replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard chat</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh;background:#f6f6f4}
header{padding:.6rem 1rem;background:#1f2933;color:#fff;font-weight:600}
#notice{padding:.5rem 1rem;background:#fff4ce;color:#5c4400;font-size:.9rem}
#notice:empty{display:none}
#log{flex:1;overflow:auto;padding:1rem;display:flex;flex-direction:column;gap:.5rem}
.msg{max-width:46rem;padding:.5rem .75rem;border-radius:.6rem;white-space:pre-wrap;word-wrap:break-word}
.user{align-self:flex-end;background:#d8ecff}.assistant{align-self:flex-start;background:#fff;border:1px solid #e2e2e2}
.error{align-self:center;color:#9b1c1c;font-size:.85rem}
#typing{padding:0 1rem;height:1.2rem;color:#777;font-size:.85rem}
form{display:flex;gap:.5rem;padding:.75rem 1rem;background:#fff;border-top:1px solid #e2e2e2}
input{flex:1;font:inherit;padding:.5rem;border:1px solid #ccc;border-radius:.4rem}
button{font:inherit;padding:.5rem 1rem;border:0;border-radius:.4rem;background:#1f6feb;color:#fff}
</style></head><body>
<header>Switchboard</header>
<div id="notice" data-testid="notice">${escaped}</div>
<div id="log" data-testid="log" aria-live="polite"></div>
<div id="typing"></div>
<form id="form"><input id="text" autocomplete="off" placeholder="Message" aria-label="Message"><button id="send" type="submit">Send</button></form>
<script>
(() => {
  const key = "switchboard.visitor";
  let visitor = localStorage.getItem(key);
  if (!visitor) { visitor = (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2) + Date.now()).replace(/[^A-Za-z0-9_-]/g, ""); localStorage.setItem(key, visitor); }
  // A gateway with gateway.auth.token wants it: open the page as /#token=<token>.
  const m = /token=([^&]+)/.exec(location.hash); const token = m ? "&token=" + encodeURIComponent(decodeURIComponent(m[1])) : "";
  const log = document.getElementById("log"), typing = document.getElementById("typing"), notice = document.getElementById("notice");
  const add = (cls, text) => { const d = document.createElement("div"); d.className = "msg " + cls; d.textContent = text; log.appendChild(d); log.scrollTop = log.scrollHeight; };
  let ws, seq = 0, queue = [];
  const connect = () => {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/webchat/ws?v=" + encodeURIComponent(visitor) + token);
    ws.onopen = () => { for (const f of queue.splice(0)) ws.send(f); };
    ws.onmessage = (e) => {
      const f = JSON.parse(e.data);
      if (f.type === "hello" && f.notice) notice.textContent = f.notice;
      else if (f.type === "message") { typing.textContent = ""; add("assistant", f.text); }
      else if (f.type === "typing") typing.textContent = "typing…";
      else if (f.type === "error") add("error", f.message);
    };
    ws.onclose = () => setTimeout(connect, 1000);
  };
  connect();
  document.getElementById("form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("text"); const text = input.value.trim(); if (!text) return;
    input.value = ""; add("user", text);
    const frame = JSON.stringify({ type: "message", id: Date.now() + "-" + (++seq), text });
    if (ws.readyState === 1) ws.send(frame); else queue.push(frame);
  });
})();
</script>
</body></html>`;
}
