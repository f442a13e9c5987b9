// bench/bench_codex_sdk.py's client: the published Codex SDK's thread.run() for one
// Task, timed here around run() alone, alternating between the sides it is given.
//
//   node _codex_sdk_run.mjs CONFIG_JSON
//
// CONFIG_JSON: {sdkDir, prompt, expect, runs, warmup, sides: [{name, codexPath,
// baseUrl?, apiKey?, env, thread}]}. Prints {name: [milliseconds, ...]}.
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const entry = path.join(config.sdkDir, "node_modules", "@openai", "codex-sdk", "dist", "index.js");
const { Codex } = await import(pathToFileURL(entry).href);

const sides = config.sides.map((side) => ({
  ...side,
  codex: new Codex({
    codexPathOverride: side.codexPath,
    baseUrl: side.baseUrl,
    apiKey: side.apiKey,
    env: side.env,
  }),
}));

async function once(side) {
  const thread = side.codex.startThread(side.thread);
  const began = performance.now();
  const result = await thread.run(config.prompt);
  const took = performance.now() - began;
  if (result.finalResponse !== config.expect) {
    throw new Error(`${side.name}: final response ${JSON.stringify(result.finalResponse)}`);
  }
  return took;
}

const walls = Object.fromEntries(sides.map((side) => [side.name, []]));
for (let round = 0; round < config.warmup + config.runs; round += 1) {
  // Alternate which side goes first, so neither always follows the other.
  const order = round % 2 === 0 ? sides : [...sides].reverse();
  for (const side of order) {
    const took = await once(side);
    if (round >= config.warmup) walls[side.name].push(took);
  }
}
process.stdout.write(JSON.stringify(walls) + "\n");
