/**
 * OpenClaw's hook shapes → memtier's hook contract (docs/hooks.md), as plain data.
 *
 * Pure functions: no I/O, so they are the same in the Gateway, in
 * `openclaw agent --local` and in a test harness. Payloads are bounded here so
 * a request always fits the sidecar's body limit (1 MiB): memtier keeps at most
 * 32,000 characters of an entry and 2,000 of a tool payload, so clipping to
 * those lengths (head and tail for a prompt, whose tail recall reads) changes
 * nothing memtier stores or recalls.
 */

import type { AgentContext, SessionContext, ToolContext } from "./types.js";

/** memtier's HookContext, snake_case as the sidecar reads it. */
export interface MemtierCtx {
  agent_id: string;
  session_key: string;
  session_id: string;
  run_id: string;
  project: string;
}

export interface MemtierMessage {
  role: string;
  content: string;
  name?: string;
}

/** Characters of one message or tool payload sent (memtier keeps 32,000 of an entry). */
export const MAX_TEXT = 32_768;
/** Characters of all messages of one agent_end or before_compaction together (newest kept first). */
export const MAX_MESSAGES_TEXT = 200_000;
/**
 * Wrapper tools of OpenClaw's Tool Search: the inner call fires its own before/after_tool_call,
 * so memtier checks and records that one, not the wrapper.
 */
export const WRAPPER_TOOLS = new Set(["tool_call", "tool_search", "tool_describe"]);
/** memtier's own tools: their results are memory already; recording them again would echo memory into itself. */
export const OWN_TOOLS = new Set(["memory_search", "memory_get"]);

export function memtierCtx(
  ctx: AgentContext | ToolContext | SessionContext | undefined,
  project: string,
  runId?: string,
): MemtierCtx {
  const c = (ctx ?? {}) as AgentContext;
  return {
    agent_id: c.agentId || "main",
    session_key: c.sessionKey ?? "",
    session_id: c.sessionId || c.sessionKey || "",
    run_id: c.runId || runId || "",
    project,
  };
}

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/**
 * ``text`` within ``limit`` UTF-16 units: its head and tail, so both ends stay what memtier reads.
 * The cuts fall between code points: an emoji (a surrogate pair) is kept whole or left out, never
 * split into a lone surrogate (which JSON carries as an escape no UTF-8 text can hold).
 */
export function clip(text: string, limit: number = MAX_TEXT): string {
  if (text.length <= limit) return text;
  const half = Math.floor(limit / 2);
  let head = half;
  if (head > 0 && isHigh(text.charCodeAt(head - 1)) && isLow(text.charCodeAt(head))) head -= 1;
  let tail = text.length - half;
  if (tail < text.length && isLow(text.charCodeAt(tail)) && isHigh(text.charCodeAt(tail - 1))) tail += 1;
  return text.slice(0, head) + text.slice(tail);
}

/** The text of a message content: a string, or the text parts of a content array (tool calls, images left out). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts: string[] = [];
  for (const part of content) {
    if (part && typeof part === "object" && (part as { type?: unknown }).type === "text") {
      const t = (part as { text?: unknown }).text;
      if (typeof t === "string") parts.push(t);
    }
  }
  return parts.join("\n");
}

/** The request this turn answers: currentUserMessage when the host gives it, else the prompt. */
export function promptOf(event: { prompt?: unknown; currentUserMessage?: unknown }): string {
  const text = typeof event.currentUserMessage === "string" ? event.currentUserMessage
    : typeof event.prompt === "string" ? event.prompt : "";
  return clip(text, 2 * MAX_TEXT);
}

const ROLE: Record<string, string> = { user: "user", assistant: "assistant", toolResult: "tool", tool: "tool", system: "system" };

/** OpenClaw messages as memtier's ``{role, content}`` list, each clipped, the total bounded (newest kept). */
export function messagesOf(messages: unknown): MemtierMessage[] {
  if (!Array.isArray(messages)) return [];
  const out: MemtierMessage[] = [];
  let budget = MAX_MESSAGES_TEXT;
  for (let i = messages.length - 1; i >= 0 && budget > 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown; toolName?: unknown };
    if (!m || typeof m !== "object" || typeof m.role !== "string" || !(m.role in ROLE)) continue;
    const content = clip(textOf(m.content), Math.min(MAX_TEXT, budget));
    budget -= content.length;
    const msg: MemtierMessage = { role: ROLE[m.role], content };
    if (typeof m.toolName === "string") msg.name = m.toolName;
    out.push(msg);
  }
  return out.reverse();
}

/** A tool's params or result as memtier receives it: text when the result has text, else bounded JSON. */
export function payloadOf(value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (typeof value === "string") return clip(value);
  if (typeof value === "object" && Array.isArray((value as { content?: unknown }).content)) {
    const text = textOf((value as { content: unknown }).content);
    if (text) return clip(text);
    value = (value as { details?: unknown }).details ?? null;
    if (value === null) return null;
  }
  let json: string;
  try {
    json = JSON.stringify(value) ?? "null";
  } catch {
    return clip(String(value));
  }
  return json.length <= MAX_TEXT ? JSON.parse(json) : clip(json);
}

/**
 * Answers of before_prompt_build by admitted request: OpenClaw may rebuild the
 * prompt of one request (a retry, a failover); the rebuild gets the same memory
 * again without the sidecar recording the prompt a second time.
 */
export class PromptAnswers<T> {
  private answers = new Map<string, T>();

  constructor(private readonly max = 64) {}

  /** The key of one admitted request: its admission id when the host gives one, else run and text. */
  static key(event: { currentUserMessageId?: unknown }, runId: string, prompt: string): string {
    return typeof event.currentUserMessageId === "string" && event.currentUserMessageId
      ? `id:${event.currentUserMessageId}` : `run:${runId}\u0000${prompt}`;
  }

  get(key: string): T | undefined {
    return this.answers.get(key);
  }

  set(key: string, answer: T): void {
    this.answers.set(key, answer);
    while (this.answers.size > this.max) this.answers.delete(this.answers.keys().next().value as string);
  }
}

/**
 * Which of agent_end's messages belong to the run: OpenClaw hands over the whole
 * session; memtier wants the run's own. before_prompt_build records how many
 * messages the session had; agent_end keeps what came after (or, when that is
 * unknown, everything from the last user message on).
 */
export class RunStarts {
  private starts = new Map<string, number>();

  constructor(private readonly max = 256) {}

  start(runId: string, sessionMessages: unknown): void {
    if (!runId) return;
    this.starts.set(runId, Array.isArray(sessionMessages) ? sessionMessages.length : 0);
    while (this.starts.size > this.max) this.starts.delete(this.starts.keys().next().value as string);
  }

  runMessages(runId: string, messages: unknown): unknown[] {
    const all = Array.isArray(messages) ? messages : [];
    const start = this.starts.get(runId);
    this.starts.delete(runId);
    if (start !== undefined && start <= all.length) return all.slice(start);
    for (let i = all.length - 1; i >= 0; i--) {
      if ((all[i] as { role?: unknown })?.role === "user") return all.slice(i);
    }
    return all;
  }
}

/**
 * Supplements memtier gave at before_tool_call, kept until that call's result is
 * written: OpenClaw's before_tool_call has no place for one, so tool_result_persist
 * appends it to the call's result, which the model reads at its next decision.
 * Keyed by the call id (else session and tool name); bounded, oldest dropped first.
 * One store a process: OpenClaw may load the plugin a second time to run its
 * tool-result middleware, and that instance must find what before_tool_call kept.
 */
export class PendingSupplements {
  private notes = new Map<string, string>();
  private given = new Map<string, string>();

  constructor(private readonly max = 256) {}

  static shared(): PendingSupplements {
    const slot = Symbol.for("memtier-openclaw.pending-supplements");
    const g = globalThis as unknown as Record<symbol, PendingSupplements | undefined>;
    return (g[slot] ??= new PendingSupplements());
  }

  static key(toolCallId: unknown, sessionKey: unknown, toolName: unknown): string {
    return typeof toolCallId === "string" && toolCallId ? `id:${toolCallId}`
      : `tool:${typeof sessionKey === "string" ? sessionKey : ""}\u0000${typeof toolName === "string" ? toolName : ""}`;
  }

  put(key: string, note: string): void {
    const had = this.notes.get(key);
    this.notes.delete(key);
    this.notes.set(key, had ? `${had}\n${note}` : note);
    while (this.notes.size > this.max) this.notes.delete(this.notes.keys().next().value as string);
  }

  /** The note kept for ``key``, removed (each is delivered once), or undefined. */
  take(key: string): string | undefined {
    const note = this.notes.get(key);
    this.notes.delete(key);
    if (note !== undefined) {
      this.given.set(key, note);
      while (this.given.size > this.max) this.given.delete(this.given.keys().next().value as string);
    }
    return note;
  }

  /** The note ``take`` gave for ``key`` (after_tool_call then sees it in the result), removed, or undefined. */
  delivered(key: string): string | undefined {
    const note = this.given.get(key);
    this.given.delete(key);
    return note;
  }
}

/**
 * A tool result (a message or a result: ``content`` text or parts) with ``note``
 * after its text, a blank line between: appended to its last text part (a model
 * provider may read only one), else as a text part of its own. Undefined when
 * ``value`` is not an object. Copied, never changed in place.
 */
export function withNote(value: unknown, note: string): Record<string, unknown> | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  const m = value as Record<string, unknown>;
  if (typeof m.content === "string") return { ...m, content: m.content ? `${m.content}\n\n${note}` : note };
  const parts = Array.isArray(m.content) ? [...m.content] : [];
  for (let i = parts.length - 1; i >= 0; i--) {
    const p = parts[i] as { type?: unknown; text?: unknown } | null;
    if (p && typeof p === "object" && p.type === "text" && typeof p.text === "string") {
      parts[i] = { ...p, text: p.text ? `${p.text}\n\n${note}` : note };
      return { ...m, content: parts };
    }
  }
  return { ...m, content: [...parts, { type: "text", text: note }] };
}

/** ``withNote`` undone: ``value`` without the ``note`` it appended (``value`` itself when it has none). */
export function withoutNote(value: unknown, note: string): unknown {
  if (!value || typeof value !== "object" || Array.isArray(value)) return value;
  const m = value as Record<string, unknown>;
  const cut = (text: string) => (text === note ? "" : text.endsWith(`\n\n${note}`) ? text.slice(0, -note.length - 2) : undefined);
  if (typeof m.content === "string") {
    const text = cut(m.content);
    return text === undefined ? value : { ...m, content: text };
  }
  if (!Array.isArray(m.content)) return value;
  for (let i = m.content.length - 1; i >= 0; i--) {
    const p = m.content[i] as { type?: unknown; text?: unknown } | null;
    if (!p || typeof p !== "object" || p.type !== "text" || typeof p.text !== "string") continue;
    const text = cut(p.text);
    if (text === undefined) return value;
    const parts = [...m.content];
    if (text) parts[i] = { ...p, text };
    else parts.splice(i, 1);
    return { ...m, content: parts };
  }
  return value;
}
