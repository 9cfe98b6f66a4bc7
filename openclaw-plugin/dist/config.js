/**
 * The plugin's settings (plugins.entries.memtier.config), with their defaults.
 *
 * OpenClaw validates the config against openclaw.plugin.json's schema before
 * the plugin loads; this module only fills in defaults and resolves the
 * workspace, so the rest of the plugin reads one plain object.
 */
import os from "node:os";
import path from "node:path";
function expandHome(p) {
    return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}
function str(v) {
    return typeof v === "string" && v.trim() !== "" ? v : undefined;
}
function int(v, fallback) {
    return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : fallback;
}
/**
 * Settings from the plugin's config, the environment and OpenClaw's own config.
 *
 * Workspace: config.workspace, else $MEMTIER_WORKSPACE, else OpenClaw's
 * agents.defaults.workspace, else ~/.openclaw/workspace (memtier's default too).
 * One sidecar serves one workspace; agents are kept apart inside it by agent id.
 */
export function resolveConfig(raw, openclawWorkspace, env = process.env) {
    const c = raw ?? {};
    const workspace = path.resolve(expandHome(str(c.workspace) ?? str(env.MEMTIER_WORKSPACE) ?? str(openclawWorkspace) ?? "~/.openclaw/workspace"));
    const sidecarDir = path.join(workspace, "memory", ".sidecar");
    const url = str(c.url);
    const command = Array.isArray(c.command) && c.command.length > 0 && c.command.every((x) => typeof x === "string")
        ? c.command
        : ["memtier"];
    const check = c.toolCheckUnavailable === "block" ? "block" : "allow";
    return {
        workspace,
        url,
        tokenFile: path.resolve(expandHome(str(c.tokenFile) ?? path.join(sidecarDir, "token"))),
        endpointFile: path.join(sidecarDir, "endpoint.json"),
        logFile: path.join(sidecarDir, "sidecar.log"),
        command,
        autoStart: typeof c.autoStart === "boolean" ? c.autoStart : url === undefined,
        project: str(c.project) ?? "",
        promptTimeoutMs: int(c.promptTimeoutMs, 2000),
        toolTimeoutMs: int(c.toolTimeoutMs, 3000),
        observeTimeoutMs: int(c.observeTimeoutMs, 10000),
        startTimeoutMs: int(c.startTimeoutMs, 10000),
        idleExitSeconds: int(c.idleExitSeconds, 900),
        toolCheckUnavailable: check,
    };
}
