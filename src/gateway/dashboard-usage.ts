/**
 * The spend panel of the operator dashboard at `/dashboard/usage`: spend per agent (or channel,
 * or model) per UTC day over the last 7–90 days as grouped bars with the day's total as a line,
 * each `day` budget with a cost limit drawn as a horizontal line (global: against the total;
 * `agent:<id>`: against that agent's bars), and a second chart of this month's cumulative spend
 * with each `month` budget as a horizontal line (a month budget is spent when the cumulative line
 * reaches it). Budgets that cannot be drawn (token limits, session scopes, another dimension) are
 * listed under the charts. Plain HTML + inline SVG over the `/ws` RPC (`usage.list { days }`),
 * refreshed on `run.finished`; with `gateway.auth.token` set, open it as
 * `/dashboard/usage#token=<token>`. Text is inserted as text. Kept apart from `dashboard.ts`.
 */
export function usagePanelPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Switchboard spend</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f6f4;color:#1f2933}
header{padding:.5rem 1rem;background:#1f2933;color:#fff;display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center}
header a{color:#cfe1ff}#status{opacity:.8;font-size:.85rem}
header label{font-size:.85rem}header select{font:inherit;font-size:.85rem}
section{background:#fff;border:1px solid #e2e2e2;border-radius:.5rem;margin:1rem;padding:.7rem .9rem;max-width:70rem}
h2{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#666;margin:0 0 .4rem}
svg{width:100%;height:auto;display:block}
svg text{font:11px system-ui,sans-serif;fill:#555}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1rem;font-size:.8rem;margin:.3rem 0}
.legend span::before{content:"";display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-.1rem;background:var(--c)}
.notes{font-size:.8rem;color:#667;margin:.3rem 0 0;padding-left:1.1rem}
.empty{font-size:.85rem;color:#667}
</style></head><body>
<header><b>Switchboard · spend</b><a href="/dashboard">sessions</a><a href="/dashboard/cron">cron</a>
<label>last <select id="days" data-testid="days"><option>7</option><option>14</option><option selected>30</option><option>90</option></select> days</label>
<label>by <select id="by" data-testid="by"><option>agent</option><option>channel</option><option>model</option></select></label>
<span id="status" data-testid="status">connecting…</span></header>
<section><h2>Spend per day (USD)</h2><div class="legend" id="legend" data-testid="legend"></div><div id="daily"></div><p class="empty" id="empty" data-testid="empty" hidden></p></section>
<section><h2>This month, cumulative (USD)</h2><div id="month"></div></section>
<section><h2>Budgets</h2><ul class="notes" id="notes" data-testid="notes"></ul></section>
<script>
(() => {
  const m = /token=([^&]+)/.exec(location.hash); const token = m ? "?token=" + encodeURIComponent(decodeURIComponent(m[1])) : "";
  if (m) for (const a of document.querySelectorAll("header a")) a.href = a.getAttribute("href") + "#token=" + m[1];
  const NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f6feb", "#e8710a", "#1a7f37", "#8250df", "#bf3989", "#0a7f8c", "#9a6700", "#57606a"];
  const RED = "#d92d20";
  const W = 900, H = 300, L = 64, R = 16, T = 14, B = 34, PW = W - L - R, PH = H - T - B;
  const svg = (tag, attrs, text) => { const e = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v)); if (text !== undefined) e.textContent = text; return e; };
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  const usd = (v) => "$" + (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : String(Number(v.toPrecision(3))));
  /** The top of a y axis with 4 round steps (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × a power of ten) holding \`v\`. */
  const niceMax = (v) => { if (!(v > 0)) return 1; const raw = (v * 1.05) / 4; const e = 10 ** Math.floor(Math.log10(raw)); return 4 * e * [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((f) => f * e >= raw); };
  const dayAfter = (d, n) => new Date(Date.parse(d + "T00:00:00Z") + n * 86400000).toISOString().slice(0, 10);
  let ws, seq = 0; const pending = new Map(); const statusEl = document.getElementById("status");
  const call = (method, params) => new Promise((resolve, reject) => { const id = ++seq; pending.set(id, { resolve, reject }); ws.send(JSON.stringify({ id, method, params })); });

  /** An empty chart: frame, y ticks up to max, x labels for days. */
  function frame(max, labels, title) {
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
    const y = (v) => T + PH - (v / max) * PH;
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4;
      s.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: i ? "#eee" : "#999" }));
      s.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, usd(v)));
    }
    const band = PW / labels.length; const every = Math.ceil(labels.length / 15);
    labels.forEach((d, i) => { if (i % every === 0) s.append(svg("text", { x: L + band * (i + 0.5), y: H - B + 16, "text-anchor": "middle" }, d.slice(5))); });
    return { s, y, band, x: (i) => L + band * (i + 0.5) };
  }
  function budgetLine(c, b, color, label) {
    const yy = c.y(b.maxCostUsd);
    const g = svg("g");
    g.append(svg("line", { x1: L, x2: W - R, y1: yy, y2: yy, stroke: color, "stroke-width": 2, "stroke-dasharray": "6 4", "data-testid": "budget-line", "data-scope": b.scope, "data-period": b.period, "data-value": b.maxCostUsd }));
    g.append(svg("text", { x: L + 6, y: yy - 5, style: "fill:" + color + ";font-weight:600" }, label));
    c.s.append(g);
  }

  function render(res, shown) {
    const by = res.by; const rows = res.rows; const budgets = res.budgets || [];
    const allDays = []; for (let i = 0; i < res.days; i++) allDays.push(dayAfter(res.from, i));
    const days = allDays.slice(-shown);
    const inView = rows.filter((r) => days.includes(r.day));
    // keys by spend in view, costliest first; colors stay with the key
    const spend = new Map(); for (const r of rows) spend.set(r.key, (spend.get(r.key) || 0) + (days.includes(r.day) ? r.costUsd : 0));
    const keys = [...spend.keys()].sort((a, b) => spend.get(b) - spend.get(a) || a.localeCompare(b));
    const color = new Map(keys.map((k, i) => [k, PALETTE[i % PALETTE.length]]));
    const colorOf = (scope) => scope === "global" ? RED : color.get(scope.slice(by.length + 1)) || "#57606a";
    const drawable = (b) => b.maxCostUsd !== null && b.maxCostUsd !== undefined && (b.scope === "global" || b.scope.startsWith(by + ":"));
    const notes = []; const noteOf = (b) => b.scope + " per " + b.period + ": " + (b.maxCostUsd !== null ? usd(b.maxCostUsd) : "") + (b.maxCostUsd !== null && b.maxTokens !== null ? " and " : "") + (b.maxTokens !== null ? b.maxTokens + " tokens" : "") + " (" + b.action + ")";
    for (const b of budgets) notes.push(noteOf(b) + (drawable(b) ? "" : b.maxCostUsd === null ? " — a token limit, not drawn (the charts are USD)" : " — not drawn (the charts are by " + by + ")"));
    const notesEl = document.getElementById("notes");
    notesEl.replaceChildren(...(notes.length ? notes.map((n) => el("li", "", n)) : [el("li", "", "No budgets configured (usage.budgets).")]));

    // daily chart: grouped bars per key, the day's total as a line, day budgets as lines
    const totals = days.map((d) => inView.filter((r) => r.day === d).reduce((a, r) => a + r.costUsd, 0));
    const dayBudgets = budgets.filter((b) => b.period === "day" && drawable(b));
    const max1 = niceMax(Math.max(...totals, ...dayBudgets.map((b) => b.maxCostUsd), 0));
    const c = frame(max1, days, "spend per " + by + " per day");
    const gw = c.band * 0.8; const bw = keys.length ? gw / keys.length : gw;
    days.forEach((d, i) => {
      keys.forEach((k, j) => {
        const r = inView.find((x) => x.day === d && x.key === k); if (!r || r.costUsd <= 0) return;
        const x = c.x(i) - gw / 2 + j * bw; const y = c.y(r.costUsd);
        const rect = svg("rect", { x, y, width: Math.max(bw - 1, 1), height: T + PH - y, fill: color.get(k), "data-testid": "bar", "data-day": d, "data-key": k, "data-cost": r.costUsd });
        rect.append(svg("title", {}, k + " · " + d + " · " + usd(r.costUsd) + " · " + r.runs + " runs · " + (r.tokens.input + r.tokens.output) + " tokens"));
        c.s.append(rect);
      });
    });
    c.s.append(svg("polyline", { points: totals.map((v, i) => c.x(i) + "," + c.y(v)).join(" "), fill: "none", stroke: "#1f2933", "stroke-width": 1.5, "data-testid": "total-line" }));
    totals.forEach((v, i) => { const p = svg("circle", { cx: c.x(i), cy: c.y(v), r: 2.5, fill: "#1f2933", "data-testid": "total-point", "data-day": days[i], "data-cost": v }); p.append(svg("title", {}, days[i] + " total " + usd(v))); c.s.append(p); });
    for (const b of dayBudgets) budgetLine(c, b, colorOf(b.scope), b.scope + " per day " + usd(b.maxCostUsd));
    document.getElementById("daily").replaceChildren(c.s);
    document.getElementById("legend").replaceChildren(...keys.map((k) => { const s = el("span", "", k); s.style.setProperty("--c", color.get(k)); return s; }), (() => { const s = el("span", "", "total"); s.style.setProperty("--c", "#1f2933"); return s; })());
    const empty = document.getElementById("empty"); empty.hidden = inView.length > 0; empty.textContent = "No spend in the last " + shown + " days.";

    // month chart: cumulative spend since the 1st (UTC) for the total and each scope with a month budget
    const monthDays = allDays.filter((d) => d.slice(0, 7) === res.to.slice(0, 7));
    const monthBudgets = budgets.filter((b) => b.period === "month" && drawable(b));
    const scopes = ["global", ...new Set(monthBudgets.map((b) => b.scope).filter((s) => s !== "global"))];
    const cum = new Map(scopes.map((s) => { let acc = 0; return [s, monthDays.map((d) => (acc += rows.filter((r) => r.day === d && (s === "global" || s === by + ":" + r.key)).reduce((a, r) => a + r.costUsd, 0)))]; }));
    const max2 = niceMax(Math.max(...[...cum.values()].flat(), ...monthBudgets.map((b) => b.maxCostUsd), 0));
    const c2 = frame(max2, monthDays, "cumulative spend this month");
    for (const [s, vals] of cum) {
      const col = s === "global" ? "#1f2933" : colorOf(s);
      c2.s.append(svg("polyline", { points: vals.map((v, i) => c2.x(i) + "," + c2.y(v)).join(" "), fill: "none", stroke: col, "stroke-width": 2, "data-testid": "cum-line", "data-scope": s, "data-cost": vals[vals.length - 1] || 0 }));
      vals.forEach((v, i) => c2.s.append(svg("circle", { cx: c2.x(i), cy: c2.y(v), r: 2.5, fill: col, "data-testid": "cum-point", "data-scope": s })));
    }
    for (const b of monthBudgets) budgetLine(c2, b, colorOf(b.scope), b.scope + " per month " + usd(b.maxCostUsd));
    document.getElementById("month").replaceChildren(c2.s);
  }

  async function load() {
    const shown = Number(document.getElementById("days").value);
    // at least back to the 1st of the month, for the cumulative chart
    const res = await call("usage.list", { period: "day", by: document.getElementById("by").value, days: Math.max(shown, 31) });
    render(res, shown);
    statusEl.textContent = "updated " + new Date().toLocaleTimeString();
  }
  document.getElementById("days").onchange = () => load();
  document.getElementById("by").onchange = () => load();
  let refresh = null; const soon = () => { clearTimeout(refresh); refresh = setTimeout(load, 500); };
  const connect = () => {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws" + token);
    ws.onopen = () => { statusEl.textContent = "connected"; load(); };
    ws.onmessage = (e) => { const f = JSON.parse(e.data);
      if (f.event) { if (f.event === "run.finished") soon(); return; }
      const p = pending.get(f.id); if (!p) return; pending.delete(f.id); if (f.ok) p.resolve(f.result); else { statusEl.textContent = f.error.code + ": " + f.error.message; p.reject(f.error); } };
    ws.onclose = () => { statusEl.textContent = "disconnected; retrying…"; setTimeout(connect, 1500); };
  };
  connect();
})();
</script>
</body></html>`;
}
