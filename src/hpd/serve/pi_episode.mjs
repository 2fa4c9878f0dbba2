// One episode of the REAL Pi agent loop (@earendil-works/pi-agent-core, from the bridge's node_modules)
// whose model is an OpenAI-compatible endpoint reached through Pi's own openai-completions provider
// (`streamSimple` from "@earendil-works/pi-ai/api/openai-completions"): the real-Pi rollout mode.
//
// Python (src/hpd/serve/pi_episode.py) drives it over stdio, one JSON object per line:
//   first line: {"bridgeDir", "baseUrl", "modelId", "systemPrompt", "prompts":[text], "tools":[{name,description,parameters}],
//                "maxTokens", "temperature"?, "toolExecution"?, "maxTurns"?, "apiKey"?}
//   -> {"type":"tool_request","id","toolCallId","name","args"}   <- {"id","result"|"throw"}
//   -> {"type":"event","event"} for every AgentEvent, then {"type":"done","messages","endReason"} (or {"type":"fatal","error"}).
// maxTurns (hpd's turn budget; Pi has none) ends the run through Pi 1.6's own `finishTurn -> {action:"end"}` hook
// after turn maxTurns when that turn's calls would need another provider call, as hpd.harness.Harness does
// (endReason "max_turns"); otherwise endReason is the last assistant's "error"/"aborted", else "natural".
// Packages are imported by file path from bridgeDir/node_modules so this script can live in the hpd package.
// The stdio channel (bridge/stdio.mjs) is imported from the working directory, which is the bridge
// folder (pi_episode.py starts node there).
import { pathToFileURL } from "node:url";

const { openChannel } = await import(pathToFileURL(`${process.cwd()}/stdio.mjs`).href);
const { out, first, ask, close } = openChannel();

const setup = await first;
try {
  const pkg = (p) => pathToFileURL(`${setup.bridgeDir}/node_modules/@earendil-works/${p}`).href;
  const { runAgentLoop } = await import(pkg("pi-agent-core/dist/index.js"));
  const { streamSimple } = await import(pkg("pi-ai/dist/api/openai-completions.js"));

  const model = {
    id: setup.modelId ?? "hpd", name: setup.modelId ?? "hpd", api: "openai-completions", provider: "hpd",
    baseUrl: setup.baseUrl, reasoning: false, input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: setup.contextWindow ?? 32768,
    maxTokens: setup.maxTokens ?? 512,
  };
  const decls = (setup.tools ?? []).map((t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters ?? { type: "object" } }));
  const tools = decls.map((t) => ({
    ...t,
    label: t.name,
    execute: async (toolCallId, args) => {
      const answer = await ask("tool_request", { toolCallId, name: t.name, args });
      if (answer.throw !== undefined) throw new Error(answer.throw);
      return answer.result;
    },
  }));
  // Pi 1.6 Agent's initial context: a leading system message holds the prompt and declares the tools.
  const messages = [];
  if (setup.systemPrompt || decls.length > 0) {
    messages.push({ role: "system", content: setup.systemPrompt ?? "", ...(decls.length ? { toolsAdded: decls } : {}), timestamp: Date.now() });
  }
  const prompts = (setup.prompts ?? []).map((text) => ({ role: "user", content: text, timestamp: Date.now() }));
  let turns = 0;
  let endReason = "natural";
  const config = {
    model,
    convertToLlm: (ms) => ms.filter((m) => ["user", "assistant", "toolResult", "system"].includes(m.role)),
    toolExecution: setup.toolExecution ?? "parallel",
    maxTokens: setup.maxTokens ?? 512,
    finishTurn: async (turn) => {
      turns += 1;
      const calls = (turn.message.content ?? []).some((b) => b.type === "toolCall");
      const live = !["error", "aborted"].includes(turn.message.stopReason);
      if (setup.maxTurns && turns >= setup.maxTurns && calls && live) {
        endReason = "max_turns";
        return { action: "end" };
      }
      return undefined;
    },
    ...(setup.temperature !== undefined ? { temperature: setup.temperature } : {}),
  };
  const streamFn = (m, context, options) => streamSimple(m, context, { ...options, apiKey: setup.apiKey || "hpd-local" });
  const emit = async (event) => out({ type: "event", event: JSON.parse(JSON.stringify(event)) });
  const controller = new AbortController();
  const result = await runAgentLoop(prompts, { messages, tools }, config, emit, controller.signal, streamFn);
  const last = [...result].reverse().find((m) => m.role === "assistant");
  if (endReason === "natural" && last && ["error", "aborted"].includes(last.stopReason)) endReason = last.stopReason;
  out({ type: "done", messages: [...messages, ...result], endReason });
} catch (error) {
  out({ type: "fatal", error: String(error && error.stack ? error.stack : error) });
  process.exitCode = 1;
}
close();
