export * from "./client.js";
export * from "./tool.js";
export type { components, paths, operations } from "./api.js";
