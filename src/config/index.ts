export {
  discoverConfigFile,
  envLogLevel,
  type LoadedConfig,
  type LoadOptions,
  loadConfig,
  parseConfig,
  substituteEnv,
} from "./load.js";
export * from "./schema.js";
