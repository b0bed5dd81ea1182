/**
 * The cron panel of the operator dashboard at `/dashboard/cron`: every job with its schedule,
 * next run, last status, and a "run now" button. Plain HTML + JS over the `/ws` RPC (`cron.list`,
 * `cron.run`), refreshed on `run.finished` events; with `gateway.auth.token` set, open it as
 * `/dashboard/cron#token=<token>`. Text is inserted as text. Kept apart from `dashboard.ts`.
 */
export function cronPanelPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard cron jobs</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f6f4}
header{padding:.5rem 1rem;background:#1f2933;color:#fff;display:flex;gap:1rem;align-items:center}
header a{color:#cfe1ff}#status{opacity:.8;font-size:.85rem}
table{border-collapse:collapse;margin:1rem;background:#fff;min-width:60rem}
th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e5e5e5;font-size:.85rem;vertical-align:top}
th{font-size:.75rem;text-transform:uppercase;letter-spacing:.05em;color:#666}
.mono{font-family:ui-monospace,monospace}.ok{color:#1a7f37}.error,.timeout,.aborted{color:#b42318}.queued{color:#1f6feb}
button{font:inherit;font-size:.8rem}
</style></head><body>
<header><b>Switchboard · cron jobs</b><a href="/dashboard">sessions</a><a href="/dashboard/usage">spend</a><span id="status">connecting…</span></header>
<table><thead><tr><th>job</th><th>schedule</th><th>agent</th><th>enabled</th><th>next run</th><th>last run</th><th>delivery</th><th></th></tr></thead>
<tbody id="jobs" data-testid="jobs"></tbody></table>
<script>
(() => {
  const m = /token=([^&]+)/.exec(location.hash); const token = m ? "?token=" + encodeURIComponent(decodeURIComponent(m[1])) : "";
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  const when = (ms) => ms ? new Date(ms).toLocaleString() : "–";
  const sched = (s) => s.cron ? "cron " + s.cron + " (" + (s.tz || "UTC") + ")" : s.every ? "every " + s.every : "at " + s.at;
  const deliv = (d) => d.mode === "none" ? "none" : d.to === "last" ? "last chat of " + d.from : d.channel + ":" + d.to;
  let ws, seq = 0; const pending = new Map(); const statusEl = document.getElementById("status");
  const call = (method, params) => new Promise((resolve, reject) => { const id = ++seq; pending.set(id, { resolve, reject }); ws.send(JSON.stringify({ id, method, params })); });
  async function load() {
    const r = await call("cron.list", {});
    const rows = r.jobs.map((j) => {
      const tr = el("tr"); tr.dataset.job = j.id;
      const last = el("td", j.lastRun ? j.lastRun.status : "", j.lastRun ? j.lastRun.status + " · " + when(j.lastRun.at) + (j.lastRun.durationMs !== undefined ? " · " + j.lastRun.durationMs + " ms" : "") : "–");
      last.dataset.testid = "last";
      const next = el("td", "", when(j.nextRunAt)); next.dataset.testid = "next";
      const btn = el("button", "", "run now"); btn.dataset.testid = "run";
      btn.onclick = async () => { btn.disabled = true; try { const res = await call("cron.run", { id: j.id }); statusEl.textContent = "accepted " + res.runId; } finally { btn.disabled = false; } };
      const act = el("td"); act.append(btn);
      tr.append(el("td", "mono", j.id), el("td", "mono", sched(j.schedule)), el("td", "", j.agentId), el("td", "", j.enabled ? "yes" : "no"), next, last, el("td", "", deliv(j.delivery)), act);
      return tr;
    });
    document.getElementById("jobs").replaceChildren(...rows);
  }
  let refresh = null; const soon = () => { clearTimeout(refresh); refresh = setTimeout(load, 200); };
  const connect = () => {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws" + token);
    ws.onopen = () => { statusEl.textContent = "connected"; load(); };
    ws.onmessage = (e) => { const f = JSON.parse(e.data);
      if (f.event) { if (f.event === "run.finished" || f.event === "run.started") soon(); return; }
      const p = pending.get(f.id); if (!p) return; pending.delete(f.id); if (f.ok) p.resolve(f.result); else { statusEl.textContent = f.error.code + ": " + f.error.message; p.reject(f.error); } };
    ws.onclose = () => { statusEl.textContent = "disconnected; retrying…"; setTimeout(connect, 1500); };
  };
  connect();
})();
</script>
</body></html>`;
}
