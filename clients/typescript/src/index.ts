// reckon's TypeScript client: the HTTP API, the retry guard, the verdict
// stream, and tool wrappers that report an agent's calls.
export * from "./client.js";
export * from "./tool.js";
export type { components, paths, operations } from "./api.js";
