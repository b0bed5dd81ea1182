import { z } from "zod";
import { parseDurationMs } from "./schedule.js";

/**
 * The `media` config block (API.md §8.1–8.2): where attachments are stored and for how long, the
 * per-kind size caps, how the model is shown each kind, and text-to-speech. Kept in its own file
 * so `schema.ts` only wires it in.
 */

const duration = z
  .string()
  .trim()
  .refine((v) => parseDurationMs(v) !== null, { message: 'must be a duration like "7d", "24h" or "30m"' });

const MiB = 1024 * 1024;

export const mediaS3Schema = z.strictObject({
  bucket: z.string().min(1),
  prefix: z.string().default("media/"),
  region: z.string().min(1).default("us-east-1"),
  /** Any S3-compatible service (MinIO, R2, Garage); unset = AWS. */
  endpoint: z.string().url().optional(),
  forcePathStyle: z.boolean().default(true),
  accessKeyId: z.string().optional(),
  secretAccessKey: z.string().optional(),
});

export const mediaSchema = z
  .strictObject({
    store: z
      .strictObject({
        driver: z.enum(["fs", "s3"]).default("fs"),
        /** fs driver: default `<stateDir>/media`. */
        dir: z.string().min(1).optional(),
        /** Files older than this are pruned; `GET /media/<id>` answers 404 after it. */
        retention: duration.default("7d"),
        s3: mediaS3Schema.optional(),
      })
      .prefault({})
      .superRefine((s, ctx) => {
        if (s.driver === "s3" && !s.s3)
          ctx.addIssue({ code: "custom", message: 'required when driver is "s3"', path: ["s3"] });
      }),
    /** Largest file taken per kind, in bytes (a channel's `mediaMaxMb` may be lower). */
    maxBytes: z
      .strictObject({
        image: z
          .number()
          .int()
          .positive()
          .default(10 * MiB),
        audio: z
          .number()
          .int()
          .positive()
          .default(25 * MiB),
        video: z
          .number()
          .int()
          .positive()
          .default(50 * MiB),
        file: z
          .number()
          .int()
          .positive()
          .default(20 * MiB),
      })
      .prefault({}),
    understanding: z
      .strictObject({
        image: z
          .strictObject({
            mode: z.enum(["native", "off"]).default("native"),
            maxSide: z.number().int().min(64).max(8000).default(2048),
            /**
             * Pictures from earlier lines still sent as pictures, counted back from the newest (the
             * newest line's own are always sent, all of them); older ones reach the model as a
             * one-line note with their name and id.
             */
            historyLimit: z.number().int().min(0).max(100).default(4),
          })
          .prefault({}),
        audio: z
          .strictObject({
            mode: z.enum(["transcribe", "off"]).default("transcribe"),
            /** A configured `models.providers` entry with an OpenAI-compatible `/audio/transcriptions`. */
            provider: z.string().min(1).default("openai"),
            model: z.string().min(1).default("whisper-1"),
            language: z.string().min(2).max(16).nullable().default(null),
            /** Also post the transcript into the chat. */
            echoTranscript: z.boolean().default(false),
          })
          .prefault({}),
        documents: z
          .strictObject({
            mode: z.enum(["extract", "off"]).default("extract"),
            maxChars: z.number().int().min(100).max(1_000_000).default(20_000),
          })
          .prefault({}),
      })
      .prefault({}),
    tts: z
      .strictObject({
        auto: z.enum(["off", "inbound", "always"]).default("off"),
        provider: z.string().min(1).default("openai"),
        model: z.string().min(1).default("tts-1"),
        voice: z.string().min(1).default("alloy"),
      })
      .prefault({}),
  })
  .prefault({});

export type MediaConfig = z.infer<typeof mediaSchema>;

/** `channels.<name>.mediaMaxMb` (decimals allowed), with the platform's default. */
export const mediaMaxMb = (defaultMb: number) => z.number().positive().max(4096).default(defaultMb);
