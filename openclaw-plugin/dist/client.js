/**
 * The sidecar client: find, start and call `memtier serve`, always within a deadline.
 *
 * One sidecar serves one workspace. The client connects to `url` when
 * configured; otherwise it reads `<workspace>/memory/.sidecar/endpoint.json`
 * (written by a running sidecar) and checks /health; otherwise, with
 * autoStart, it starts `memtier --workspace <ws> serve --json --idle-exit N`
 * detached (so `openclaw agent --local` runs reuse it) and reads the ready line.
 * A sidecar that dies is noticed at the next call (connection refused), that
 * call fails at once, and a restart is started in the background.
 *
 * Every call has a deadline that includes finding or starting the sidecar, so
 * a hook never waits longer than its own timeout, whatever state memory is in.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
export class SidecarError extends Error {
    status;
    constructor(message, status = 0) {
        super(message);
        this.status = status;
        this.name = "SidecarError";
    }
}
/** Minimum pause between two attempts to start the sidecar. */
const RESTART_BACKOFF_MS = 5_000;
/** The longest /health check when finding a running sidecar. */
const HEALTH_TIMEOUT_MS = 1_000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)).unref());
function readToken(file) {
    let token;
    try {
        token = fs.readFileSync(file, "utf8").split("\n")[0].trim();
    }
    catch (err) {
        throw new SidecarError(`cannot read the sidecar token ${file}: ${err.message}`);
    }
    if (!token)
        throw new SidecarError(`the sidecar token file ${file} is empty`);
    return token;
}
function loopbackUrl(raw) {
    let url;
    try {
        url = new URL(raw);
    }
    catch {
        throw new SidecarError(`sidecar url ${JSON.stringify(raw)} is not a URL`);
    }
    if (url.protocol !== "http:" || !["127.0.0.1", "[::1]", "localhost"].includes(url.hostname)) {
        throw new SidecarError(`sidecar url ${raw}: expected http://127.0.0.1:<port> (loopback only)`);
    }
    return url;
}
function isConnectionError(err) {
    const code = err?.code;
    return code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE" || code === "ENOTFOUND";
}
export class SidecarClient {
    cfg;
    logger;
    endpoint;
    starting;
    child;
    lastStart = 0;
    up;
    /** The token file of the sidecar in use (endpoint.json or the ready line may name another than the default). */
    tokenPath;
    agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    constructor(cfg, logger) {
        this.cfg = cfg;
        this.logger = logger;
        this.tokenPath = cfg.tokenFile;
    }
    /** POST /v1/<name> and return the JSON answer; throws SidecarError (or a timeout) within `timeoutMs`. */
    async call(name, body, timeoutMs) {
        const deadline = Date.now() + timeoutMs;
        const ep = await this.resolve(deadline);
        try {
            const answer = await this.request(ep, "POST", `/v1/${name}`, body, deadline - Date.now());
            this.noteUp();
            return answer;
        }
        catch (err) {
            if (err instanceof SidecarError && err.status === 401 && Date.now() < deadline) {
                // the sidecar wrote a new token (its file was replaced): read it once more
                const again = { url: ep.url, token: readToken(this.tokenPath) };
                this.endpoint = again;
                return this.request(again, "POST", `/v1/${name}`, body, deadline - Date.now());
            }
            if (isConnectionError(err)) {
                this.endpoint = undefined;
                this.noteDown(err.message);
                if (this.cfg.autoStart && !this.cfg.url)
                    void this.ensureStarted();
            }
            throw err;
        }
    }
    /** Start (or find) the sidecar now; resolves when it answers or the start failed (Gateway service start). */
    async start() {
        try {
            await this.resolve(Date.now() + this.cfg.startTimeoutMs);
            return true;
        }
        catch (err) {
            this.logger.warn(`memtier: sidecar not available: ${err.message}`);
            return false;
        }
    }
    /** Stop a sidecar this plugin started (Gateway service stop); one found running is left alone. */
    stop() {
        const child = this.child;
        this.child = undefined;
        this.endpoint = undefined;
        if (child && child.exitCode === null && child.signalCode === null)
            child.kill("SIGTERM");
        this.agent.destroy();
    }
    // ---- finding and starting ----------------------------------------------------
    async resolve(deadline) {
        if (this.endpoint)
            return this.endpoint;
        if (this.cfg.url) {
            this.endpoint = { url: loopbackUrl(this.cfg.url), token: readToken(this.cfg.tokenFile) };
            return this.endpoint;
        }
        const found = await this.discover(deadline);
        if (found)
            return (this.endpoint = found);
        if (!this.cfg.autoStart) {
            throw new SidecarError(`no sidecar is running for ${this.cfg.workspace} (start one: memtier --workspace ${this.cfg.workspace} serve)`);
        }
        const started = this.ensureStarted();
        const ep = await Promise.race([started, sleep(deadline - Date.now()).then(() => undefined)]);
        if (!ep)
            throw new SidecarError(`the sidecar for ${this.cfg.workspace} is not up yet`);
        return ep;
    }
    /** A running sidecar from endpoint.json that answers /health, else undefined. */
    async discover(deadline) {
        let info;
        try {
            info = JSON.parse(fs.readFileSync(this.cfg.endpointFile, "utf8"));
        }
        catch {
            return undefined;
        }
        if (typeof info.url !== "string")
            return undefined;
        try {
            const tokenPath = typeof info.token_file === "string" ? info.token_file : this.cfg.tokenFile;
            const ep = { url: loopbackUrl(info.url), token: readToken(tokenPath) };
            await this.request(ep, "GET", "/health", undefined, Math.min(HEALTH_TIMEOUT_MS, deadline - Date.now()));
            this.tokenPath = tokenPath;
            return ep;
        }
        catch {
            return undefined;
        }
    }
    ensureStarted() {
        if (this.starting)
            return this.starting;
        if (Date.now() - this.lastStart < RESTART_BACKOFF_MS)
            return Promise.resolve(undefined);
        this.lastStart = Date.now();
        this.starting = this.spawnSidecar().finally(() => {
            this.starting = undefined;
        });
        return this.starting;
    }
    spawnSidecar() {
        const [cmd, ...pre] = this.cfg.command;
        const args = [...pre, "--workspace", this.cfg.workspace, "serve", "--json",
            "--idle-exit", String(this.cfg.idleExitSeconds)];
        let log = "ignore";
        try {
            fs.mkdirSync(this.cfg.endpointFile.replace(/[/\\][^/\\]*$/, ""), { recursive: true, mode: 0o700 });
            log = fs.openSync(this.cfg.logFile, "a", 0o600);
        }
        catch {
            // no log file: the sidecar's stderr goes nowhere, memory still works
        }
        return new Promise((resolve) => {
            let done = false;
            const finish = (ep, why) => {
                if (done)
                    return;
                done = true;
                if (typeof log === "number")
                    fs.closeSync(log);
                child.stdout?.destroy();
                if (ep) {
                    this.endpoint = ep;
                    this.noteUp();
                }
                else if (why) {
                    this.noteDown(why);
                }
                resolve(ep);
            };
            const child = spawn(cmd, args, { detached: true, stdio: ["ignore", "pipe", log], env: process.env });
            this.child = child;
            child.unref();
            let out = "";
            child.stdout?.setEncoding("utf8");
            child.stdout?.on("data", (chunk) => {
                out += chunk;
                const nl = out.indexOf("\n");
                if (nl < 0)
                    return;
                try {
                    const ready = JSON.parse(out.slice(0, nl));
                    this.tokenPath = ready.token_file;
                    finish({ url: loopbackUrl(ready.url), token: readToken(ready.token_file) });
                }
                catch (err) {
                    finish(undefined, `the sidecar said ${JSON.stringify(out.slice(0, 200))}: ${err.message}`);
                }
            });
            child.on("error", (err) => finish(undefined, `cannot start ${cmd}: ${err.message}`));
            child.on("exit", (code, signal) => {
                if (this.child === child)
                    this.child = undefined;
                if (done)
                    return;
                // exit 2 while another sidecar holds the workspace lock: use that one
                void this.discover(Date.now() + HEALTH_TIMEOUT_MS).then((ep) => finish(ep, `the sidecar exited (${signal ?? `status ${code}`}); see ${this.cfg.logFile}`));
            });
        });
    }
    noteDown(why) {
        if (this.up !== false)
            this.logger.warn(`memtier: memory unavailable (${why}); turns go on without it`);
        this.up = false;
    }
    noteUp() {
        if (this.up === false)
            this.logger.info("memtier: memory is back");
        this.up = true;
    }
    // ---- HTTP ----------------------------------------------------------------------
    request(ep, method, path, body, timeoutMs) {
        if (timeoutMs <= 0)
            return Promise.reject(new SidecarError(`no time left for ${path}`));
        const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
        return new Promise((resolve, reject) => {
            const req = http.request({
                host: ep.url.hostname.replace(/^\[|\]$/g, ""), port: ep.url.port, path, method, agent: this.agent,
                headers: {
                    Authorization: `Bearer ${ep.token}`,
                    ...(data ? { "Content-Type": "application/json", "Content-Length": data.length } : {}),
                },
            }, (res) => {
                const chunks = [];
                res.on("data", (c) => chunks.push(c));
                res.on("end", () => {
                    clearTimeout(timer);
                    let parsed;
                    try {
                        parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
                    }
                    catch {
                        return reject(new SidecarError(`${path}: answer is not JSON (status ${res.statusCode})`, res.statusCode));
                    }
                    if (res.statusCode !== 200) {
                        return reject(new SidecarError(`${path}: ${parsed?.error ?? `status ${res.statusCode}`}`, res.statusCode));
                    }
                    resolve(parsed);
                });
                res.on("error", (err) => {
                    clearTimeout(timer);
                    reject(err);
                });
            });
            const timer = setTimeout(() => req.destroy(new SidecarError(`${path}: no answer within ${timeoutMs} ms`)), timeoutMs);
            timer.unref();
            req.on("error", (err) => {
                clearTimeout(timer);
                reject(err);
            });
            req.end(data);
        });
    }
}
