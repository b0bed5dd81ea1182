/** The page at `/` until the web chat is built: says how to talk to the gateway. */
export function landingPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Switchboard</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem}code,pre{background:#f3f3f3;padding:.1rem .3rem;border-radius:4px}pre{padding:.8rem;overflow:auto}</style>
</head><body>
<h1>Switchboard gateway</h1>
<p>The gateway is running. Talk to it from the command line or over JSON RPC:</p>
<pre>npx switchboard send main "hello"
npx switchboard sessions list
npx switchboard sessions history main</pre>
<pre>curl -s http://127.0.0.1:18790/rpc -H 'content-type: application/json' \\
  -d '{"id":1,"method":"chat.send","params":{"sessionKey":"main","message":"hello","timeoutSeconds":30}}'</pre>
<p>WebSocket: <code>/ws</code> carries the same frames plus <code>session.updated</code>, <code>message.appended</code>,
<code>run.started</code> and <code>run.finished</code> events. Health: <code>/healthz</code>.</p>
</body></html>`;
}
