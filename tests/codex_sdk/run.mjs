// Drives the published Codex SDK (@openai/codex-sdk), unchanged, for tests/test_codex_sdk.py.
//
//   node run.mjs SCENARIO CONFIG_JSON
//
// CONFIG_JSON: {sdkDir, codexPath, baseUrl, apiKey, env, thread: ThreadOptions, ...}.
// Prints one JSON line: what the SDK returned or yielded, or {"error": message}.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [scenario, configText] = process.argv.slice(2);
const config = JSON.parse(configText);
const entry = path.join(config.sdkDir, "node_modules", "@openai", "codex-sdk", "dist", "index.js");
const { Codex } = await import(pathToFileURL(entry).href);

const codex = new Codex({
  codexPathOverride: config.codexPath,
  baseUrl: config.baseUrl,
  apiKey: config.apiKey,
  env: config.env,
});

async function collect(thread, input, options) {
  const { events } = await thread.runStreamed(input, options);
  const seen = [];
  for await (const event of events) seen.push(event);
  return seen;
}

const scenarios = {
  // thread.run(): the completed turn.
  async run() {
    const thread = codex.startThread(config.thread);
    const result = await thread.run(config.prompt);
    return { threadId: thread.id, result };
  },
  // thread.runStreamed(): every event the SDK yields.
  async streamed() {
    const thread = codex.startThread(config.thread);
    const events = await collect(thread, config.prompt);
    return { threadId: thread.id, events };
  },
  // outputSchema: the final response follows the schema.
  async schema() {
    const thread = codex.startThread(config.thread);
    const result = await thread.run(config.prompt, { outputSchema: config.schema });
    return { threadId: thread.id, result };
  },
  // A thread resumed by id in a new process (another exec run).
  async resume() {
    const first = codex.startThread(config.thread);
    await first.run(config.prompt);
    const resumed = codex.resumeThread(first.id, config.thread);
    const events = await collect(resumed, config.secondPrompt);
    return { threadId: first.id, resumedId: resumed.id, events };
  },
  // A local image beside the text.
  async image() {
    const thread = codex.startThread(config.thread);
    const input = [
      { type: "text", text: config.prompt },
      { type: "local_image", path: config.image },
    ];
    const events = await collect(thread, input);
    return { threadId: thread.id, events };
  },
};

try {
  const outcome = await scenarios[scenario]();
  process.stdout.write(JSON.stringify(outcome) + "\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ error: String(error?.message ?? error) }) + "\n");
  process.exitCode = 1;
}
