// hpd's bridge to the real Pi agent loop (@earendil-works/pi-agent-core, pinned in package.json).
//
// Python drives it over stdio, one JSON object per line (see src/hpd/harness/bridge.py):
//   first line from Python: {"op":"run", ...setup} | {"op":"validate", schema, call} | {"op":"parse_args", text}
//   for "run", the bridge then asks Python and waits for the answer with the same id:
//     -> {"type":"llm_request","id","context"}                    <- {"id","message",["abort"]}
//     -> {"type":"tool_request","id","toolCallId","name","args"}  <- {"id","result"|"throw",["delay"],["abort"],["steer"],["followUp"]}
//     -> {"type":"before_request","id","toolCall","args"}         <- {"id","result"|"throw"}
//     -> {"type":"after_request","id","toolCall","args","result","isError"} <- {"id","result"|"throw"}
//   and reports {"type":"event","event"} for every AgentEvent (serialised when emitted) and finally
//   {"type":"done","messages"}.
// Tools are proxies: Pi validates and orders the calls, Python computes results; a tool's "delay" (ms)
// is waited here after Python's answer, so parallel batches complete in scripted order.
import { runAgentLoop } from "@earendil-works/pi-agent-core";
import { createAssistantMessageEventStream, parseToolCallArguments, validateToolArguments } from "@earendil-works/pi-ai";
import { openChannel } from "./stdio.mjs";

const { out, first, ask, close } = openChannel({ strict: true });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function runScenario(setup) {
  const controller = new AbortController();
  const queue = (mode, initial) => ({ mode, items: [...(initial ?? [])] });
  const steering = queue(setup.steeringMode ?? "one-at-a-time", setup.steering);
  const followUp = queue(setup.followUpMode ?? "one-at-a-time", setup.followUp);
  // Pi's Agent PendingMessageQueue.drain()
  const drain = (q) => {
    const taken = q.mode === "all" ? q.items.slice() : q.items.slice(0, 1);
    q.items = q.items.slice(taken.length);
    return taken;
  };
  const applySide = (answer) => {
    for (const m of answer.steer ?? []) steering.items.push(m);
    for (const m of answer.followUp ?? []) followUp.items.push(m);
    if (answer.abort) controller.abort();
  };

  const tools = (setup.tools ?? []).map((t) => ({
    name: t.name,
    label: t.label ?? t.name,
    description: t.description,
    parameters: t.parameters,
    ...(t.executionMode ? { executionMode: t.executionMode } : {}),
    execute: async (toolCallId, args) => {
      const answer = await ask("tool_request", { toolCallId, name: t.name, args });
      applySide(answer);
      if (answer.delay) await sleep(answer.delay);
      if (answer.throw !== undefined) throw new Error(answer.throw);
      return answer.result;
    },
  }));

  const streamFn = (model, context) => {
    const stream = createAssistantMessageEventStream();
    const snapshot = JSON.parse(JSON.stringify(context));
    ask("llm_request", { context: snapshot }).then((answer) => {
      applySide(answer);
      const message = answer.message;
      // Scripted raw argument text goes through the real pi-ai parser (JSON.parse, repair, argumentsError).
      for (const block of message.content) {
        if (block.type === "toolCall" && typeof block.rawArguments === "string") {
          const raw = block.rawArguments;
          delete block.rawArguments;
          Object.assign(block, parseToolCallArguments(raw));
        }
      }
      if (message.stopReason === "error" || message.stopReason === "aborted") {
        stream.push({ type: "error", reason: message.stopReason, error: message });
      } else {
        stream.push({ type: "done", reason: message.stopReason, message });
      }
    });
    return stream;
  };

  const config = {
    model: { id: "scripted", name: "scripted", api: "openai-completions", provider: "hpd", baseUrl: "http://127.0.0.1:1",
      reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 8192 },
    convertToLlm: (messages) => messages.filter((m) => ["user", "assistant", "toolResult", "system"].includes(m.role)),
    toolExecution: setup.toolExecution ?? "parallel",
    getSteeringMessages: async () => drain(steering),
    getFollowUpMessages: async () => drain(followUp),
  };
  if (setup.beforeToolCall) {
    config.beforeToolCall = async ({ toolCall, args }) => {
      const answer = await ask("before_request", { toolCall, args });
      if (answer.throw !== undefined) throw new Error(answer.throw);
      return answer.result ?? undefined;
    };
  }
  if (setup.afterToolCall) {
    config.afterToolCall = async ({ toolCall, args, result, isError }) => {
      const answer = await ask("after_request", { toolCall, args, result, isError });
      if (answer.throw !== undefined) throw new Error(answer.throw);
      return answer.result ?? undefined;
    };
  }
  const context = { messages: setup.messages ?? [], tools };
  const emit = async (event) => out({ type: "event", event: JSON.parse(JSON.stringify(event)) });
  const messages = await runAgentLoop(setup.prompts, context, config, emit, controller.signal, streamFn);
  out({ type: "done", messages });
}

// The real openai-completions provider against a loopback server: the request body it sends for
// `context` and the assistant message it builds from the scripted SSE `chunks`.
async function wireRoundTrip({ context, chunks, modelId }) {
  const { createServer } = await import("node:http");
  const { streamSimple } = await import("@earendil-works/pi-ai/api/openai-completions");
  let body;
  const server = createServer((req, res) => {
    let data = "";
    req.on("data", (c) => (data += c));
    req.on("end", () => {
      body = JSON.parse(data);
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = server.address().port;
  const model = { id: modelId ?? "qwen3-8b", name: "m", api: "openai-completions", provider: "vllm",
    baseUrl: `http://127.0.0.1:${port}/v1`, reasoning: false, input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 32768, maxTokens: 8192 };
  const stream = streamSimple(model, context, { apiKey: "x", maxTokens: 8192 });
  const message = await stream.result();
  server.close();
  return { body, message };
}

const setup = await first;
try {
  if (setup.op === "run") {
    await runScenario(setup);
  } else if (setup.op === "validate") {
    // Many cases in one call: [{schema, call}] -> [{ok, value} | {error}]
    const results = setup.cases.map(({ schema, call }) => {
      try {
        return { ok: true, value: validateToolArguments({ name: call.name, parameters: schema }, call) };
      } catch (error) {
        return { ok: false, error: error.message };
      }
    });
    out({ type: "result", results });
  } else if (setup.op === "parse_args") {
    out({ type: "result", results: setup.texts.map((t) => parseToolCallArguments(t)) });
  } else if (setup.op === "wire") {
    out({ type: "result", results: await wireRoundTrip(setup) });
  } else if (setup.op === "json_parse") {
    out({ type: "result", results: setup.texts.map((t) => { try { JSON.parse(t); return null; } catch (e) { return e.message; } }) });
  } else {
    throw new Error(`unknown op ${setup.op}`);
  }
} catch (error) {
  out({ type: "fatal", error: String(error && error.stack ? error.stack : error) });
  process.exitCode = 1;
}
close();
