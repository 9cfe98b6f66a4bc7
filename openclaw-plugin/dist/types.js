/**
 * The slice of OpenClaw's plugin API this plugin uses, typed structurally.
 *
 * Written from the SDK declarations of openclaw 2026.9.6 (PluginHook*Event,
 * PluginHookAgentContext, PluginHookToolContext, OpenClawPluginApi) so the
 * plugin builds with TypeScript alone, without installing OpenClaw.
 * Every field OpenClaw marks optional is optional here too.
 */
export {};
