/**
 * Browser code (a string for a page's `<script>`) that shows a transcript line's media parts
 * (API.md §8.1) in the web chat and the dashboard: `mediaView(part, token)` returns an element —
 * an image inline, audio with controls, video and files as a link with name and size, a
 * `media_note` as a short italic line. The bytes come from `GET /media/<id>` with the token in
 * the Authorization header, as a blob URL (the token never goes into a URL). Names are set as
 * text or attributes only, never as HTML.
 */
export const MEDIA_VIEW_JS = `
  const mediaSize = (n) => n < 1024 ? n + " B" : n < 1048576 ? (n / 1024).toFixed(1) + " KB" : (n / 1048576).toFixed(1) + " MB";
  const mediaBlobs = new Map();
  const mediaBlob = (id, token) => {
    let p = mediaBlobs.get(id);
    if (!p) {
      p = fetch("/media/" + encodeURIComponent(id), token ? { headers: { authorization: "Bearer " + token } } : {})
        .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.blob(); })
        .then((b) => URL.createObjectURL(b));
      p.catch(() => mediaBlobs.delete(id));
      mediaBlobs.set(id, p);
    }
    return p;
  };
  const mediaView = (part, token) => {
    const box = document.createElement("div"); box.className = "media media-" + String(part.type);
    const label = (part.name ? String(part.name) : String(part.type)) + (typeof part.bytes === "number" ? " (" + mediaSize(part.bytes) + ")" : "");
    const missing = (el) => { const em = document.createElement("em"); em.textContent = label + ": not available"; el.replaceWith(em); };
    if (part.type === "media_note") {
      const em = document.createElement("em"); em.className = "media-note";
      em.textContent = (part.name ? String(part.name) + ": " : "") + "not taken (" + String(part.reason).replace(/_/g, " ") + ")";
      box.append(em); return box;
    }
    if (part.type === "image") {
      const img = document.createElement("img"); img.alt = label; img.title = label; img.dataset.mediaId = String(part.mediaId);
      img.style.maxWidth = "100%"; img.style.maxHeight = "20rem"; img.style.borderRadius = ".4rem"; img.style.display = "block";
      mediaBlob(part.mediaId, token).then((u) => { img.src = u; }, () => missing(img));
      box.append(img); return box;
    }
    if (part.type === "audio") {
      const au = document.createElement("audio"); au.controls = true; au.title = label; au.dataset.mediaId = String(part.mediaId);
      mediaBlob(part.mediaId, token).then((u) => { au.src = u; }, () => missing(au));
      box.append(au);
      if (part.transcript) { const t = document.createElement("em"); t.textContent = String(part.transcript); box.append(t); }
      return box;
    }
    const a = document.createElement("a"); a.href = "#"; a.textContent = label; a.dataset.mediaId = String(part.mediaId);
    a.onclick = (e) => {
      e.preventDefault();
      mediaBlob(part.mediaId, token).then((u) => { const d = document.createElement("a"); d.href = u; d.download = part.name ? String(part.name) : ""; document.body.append(d); d.click(); d.remove(); }, () => missing(a));
    };
    box.append(a); return box;
  };
`;
