import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "../log.js";
import { type MediaStore, MediaStoreError } from "../media/types.js";

/**
 * `GET /media/<mediaId>` and `POST /media` (API.md §8.1): the stored bytes with their sniffed type
 * for the dashboard and the web chat, and the web chat's upload (multipart field `file`). Both
 * behind the gateway token (bearer header, or `?token=` for `<img src>`); the Host/Origin checks
 * of the server apply as to every route.
 */

export interface MediaRoutesOptions {
  store: MediaStore;
  /** Largest upload in bytes (`channels.webchat.mediaMaxMb`). */
  maxUploadBytes: number;
  /** `media.maxBytes` per kind. */
  maxBytesByKind: { image: number; audio: number; video: number; file: number };
  authorized: (req: FastifyRequest, queryToken?: string) => boolean;
  logger: Logger;
}

/** Types a browser may render in place; everything else is a download. */
const INLINE_RE = /^(image\/(png|jpeg|gif|webp)|audio\/|video\/|application\/pdf$|text\/plain$)/;

function unauthorized(reply: FastifyReply) {
  return reply.status(401).send({
    ok: false,
    error: {
      code: "UNAUTHORIZED",
      message: "missing or invalid bearer token (Authorization: Bearer <gateway.auth.token>)",
    },
  });
}

function kindOf(mime: string): "image" | "audio" | "video" | "file" {
  const f = mime.split("/")[0];
  return f === "image" || f === "audio" || f === "video" ? f : "file";
}

export function registerMediaRoutes(app: FastifyInstance, opts: MediaRoutesOptions): void {
  const { store } = opts;
  app.get("/media/:mediaId", async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    if (!opts.authorized(req, q.token)) return unauthorized(reply);
    const { mediaId } = req.params as { mediaId: string };
    const meta = await store.stat(mediaId);
    const stream = meta ? await store.open(mediaId) : null;
    if (!meta || !stream)
      return reply
        .status(404)
        .send({ ok: false, error: { code: "NOT_FOUND", message: `no media ${mediaId}` } });
    void reply.headers({
      "content-type": meta.mimeType,
      "content-length": String(meta.bytes),
      "x-content-type-options": "nosniff",
      // Stored files are data, never a page of this origin (an uploaded SVG or HTML runs nothing).
      "content-security-policy": "default-src 'none'; sandbox",
      "cache-control": "private, max-age=86400, immutable",
      "content-disposition": INLINE_RE.test(meta.mimeType) ? "inline" : "attachment",
    });
    return reply.send(stream);
  });

  const cap = Math.min(opts.maxUploadBytes, Math.max(...Object.values(opts.maxBytesByKind)));
  app.register(async (scope) => {
    await scope.register(multipart, {
      // One byte over the cap reaches the store, which refuses it as too large.
      limits: { fileSize: cap + 1, files: 1, fields: 10, parts: 11, fieldSize: 1024, headerPairs: 200 },
    });
    scope.post("/media", async (req, reply) => {
      if (!opts.authorized(req)) return unauthorized(reply);
      if (!req.isMultipart())
        return reply.status(415).send({
          ok: false,
          error: {
            code: "INVALID_PARAMS",
            message: "body must be multipart/form-data with a field `file`",
          },
        });
      try {
        for await (const part of req.parts()) {
          if (part.type !== "file") continue;
          if (part.fieldname !== "file") {
            part.file.resume();
            continue;
          }
          const stored = await store.put(part.file, {
            maxBytes: cap,
            ...(part.mimetype ? { declaredType: part.mimetype } : {}),
            ...(part.filename ? { name: part.filename } : {}),
          });
          if (part.file.truncated || stored.bytes > opts.maxBytesByKind[kindOf(stored.mimeType)])
            return tooLarge(reply, opts.maxBytesByKind[kindOf(stored.mimeType)]);
          return reply.send({ mediaId: stored.mediaId, mimeType: stored.mimeType, bytes: stored.bytes });
        }
      } catch (err) {
        if (
          (err instanceof MediaStoreError && err.reason === "too_large") ||
          (err as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE"
        )
          return tooLarge(reply, cap);
        opts.logger.warn({ err: (err as Error).message }, "media: upload failed");
        return reply.status(400).send({
          ok: false,
          error: {
            code: "INVALID_PARAMS",
            message: "upload failed: the body is not a complete multipart form",
          },
        });
      }
      return reply.status(400).send({
        ok: false,
        error: { code: "INVALID_PARAMS", message: "file: required (multipart field `file`)" },
      });
    });
  });
}

function tooLarge(reply: FastifyReply, limit: number) {
  return reply.status(413).send({
    ok: false,
    error: { code: "INVALID_PARAMS", message: `file: too large (limit ${limit} bytes)` },
  });
}
