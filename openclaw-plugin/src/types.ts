/**
 * The slice of OpenClaw's plugin API this plugin uses, typed structurally.
 *
 * Written from the SDK declarations of openclaw 2026.9.6 (PluginHook*Event,
 * PluginHookAgentContext, PluginHookToolContext, OpenClawPluginApi) so the
 * plugin builds with TypeScript alone, without installing OpenClaw.
 * Every field OpenClaw marks optional is optional here too.
 */

export interface PluginLogger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

/** ctx of agent hooks (before_prompt_build, agent_end, before_compaction). */
export interface AgentContext {
  runId?: string;
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
  workspaceDir?: string;
}

/** ctx of tool hooks (before_tool_call, after_tool_call). */
export interface ToolContext {
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
  runId?: string;
  toolName?: string;
  toolCallId?: string;
  abortSignal?: AbortSignal;
}

/** ctx of session hooks (session_end). */
export interface SessionContext {
  agentId?: string;
  sessionId?: string;
  sessionKey?: string;
}

export interface BeforePromptBuildEvent {
  prompt: string;
  currentUserMessage?: string;
  currentUserMessageId?: string;
  messages: unknown[];
}

export interface BeforePromptBuildResult {
  prependContext?: string;
  prependSystemContext?: string;
}

export interface BeforeToolCallEvent {
  toolName: string;
  params: Record<string, unknown>;
  runId?: string;
  toolCallId?: string;
}

export interface BeforeToolCallResult {
  params?: Record<string, unknown>;
  block?: boolean;
  blockReason?: string;
}

export interface AfterToolCallEvent {
  toolName: string;
  params: Record<string, unknown>;
  runId?: string;
  toolCallId?: string;
  result?: unknown;
  error?: string;
  durationMs?: number;
}

/** tool_result_persist (synchronous): the tool result message about to be written to the transcript. */
export interface ToolResultPersistEvent {
  toolName?: string;
  toolCallId?: string;
  message: unknown;
  isSynthetic?: boolean;
}

export interface ToolResultPersistContext {
  agentId?: string;
  sessionKey?: string;
  toolName?: string;
  toolCallId?: string;
}

export interface ToolResultPersistResult {
  message?: unknown;
}

/** registerAgentToolResultMiddleware: a tool's result after it ran, before the model reads it. */
export interface ToolResultMiddlewareEvent {
  toolCallId: string;
  toolName: string;
  args: Record<string, unknown>;
  isError?: boolean;
  result: unknown;
}

export interface ToolResultMiddlewareContext {
  runtime: string;
  agentId?: string;
  sessionId?: string;
  sessionKey?: string;
  runId?: string;
}

export interface AgentEndEvent {
  runId?: string;
  messages: unknown[];
  success: boolean;
  error?: string;
  durationMs?: number;
}

export interface BeforeCompactionEvent {
  messageCount: number;
  messages?: unknown[];
}

export interface SessionEndEvent {
  sessionId: string;
  sessionKey?: string;
  messageCount: number;
  reason?: string;
}

export interface ToolResult {
  content: Array<{ type: "text"; text: string }>;
  details: unknown;
}

export interface AgentTool {
  name: string;
  label: string;
  description: string;
  parameters: Record<string, unknown>;
  execute: (toolCallId: string, params: Record<string, unknown>, signal?: AbortSignal) => Promise<ToolResult>;
}

/** What a tool factory receives: who is calling. */
export interface ToolFactoryContext {
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
  workspaceDir?: string;
}

export interface ServiceContext {
  workspaceDir?: string;
  stateDir: string;
  logger: PluginLogger;
}

export interface PluginApi {
  id: string;
  registrationMode: string;
  config?: { agents?: { defaults?: { workspace?: string } } };
  pluginConfig?: Record<string, unknown>;
  logger: PluginLogger;
  on: (hook: string, handler: (event: any, ctx: any) => unknown, opts?: { priority?: number; timeoutMs?: number }) => void;
  registerTool: (tool: (ctx: ToolFactoryContext) => AgentTool, opts?: { name?: string }) => void;
  /** Needs `contracts.agentToolResultMiddleware` in the manifest and the plugin explicitly enabled. */
  registerAgentToolResultMiddleware?: (
    handler: (event: ToolResultMiddlewareEvent, ctx: ToolResultMiddlewareContext) => { result: unknown } | undefined,
    options?: { runtimes?: string[] },
  ) => void;
  registerService: (service: {
    id: string;
    start: (ctx: ServiceContext) => void | Promise<void>;
    stop?: (ctx: ServiceContext) => void | Promise<void>;
  }) => void;
}
