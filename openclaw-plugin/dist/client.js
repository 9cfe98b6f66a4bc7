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
 *
 * Trust: the client sends the token or any content only on a connection whose
 * server has first proved it is this workspace's sidecar. Every new connection
 * starts with `GET /v1/challenge?nonce=<random>` (no token); the answer's proof
 * must equal HMAC-SHA256(token, nonce, pid, workspace, port) for the port this
 * connection reached (constant-time compare), and its pid and workspace must be
 * the ones endpoint.json (or the ready line) named. endpoint.json of a dead pid,
 * or of a server that fails the challenge, is a stale file: no sidecar (one is
 * started when autoStart is on). A fixed `url` gets the same challenge.
 */
import { spawn } from "node:child_process";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
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
/** The longest challenge on a new connection (connect, ask, check) when the request names no deadline. */
const CHALLENGE_TIMEOUT_MS = 10_000;
/** sidecar.log beyond this size is moved to sidecar.log.1 when a sidecar is started. */
const LOG_MAX_BYTES = 1 << 20;
const CHALLENGE_PREFIX = "memtier-sidecar-challenge-v1";
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
/** Keep sidecar.log bounded: past LOG_MAX_BYTES it becomes sidecar.log.1 (the one before is dropped). */
function rotateLog(file) {
    try {
        const st = fs.lstatSync(file);
        if (st.isSymbolicLink())
            fs.unlinkSync(file);
        else if (st.size > LOG_MAX_BYTES)
            fs.renameSync(file, `${file}.1`);
    }
    catch {
        // no log yet
    }
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
    return code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE" || code === "ENOTFOUND"
        || code === "EMEMTIERPROOF";
}
/** A process with this pid exists and is ours to signal (a sidecar we may use runs as us). */
function pidAlive(pid) {
    if (!Number.isInteger(pid) || pid <= 0)
        return false;
    try {
        process.kill(pid, 0);
        return true;
    }
    catch {
        return false; // ESRCH: gone; EPERM: another user's process, not our sidecar
    }
}
function samePath(a, b) {
    const real = (p) => {
        try {
            return fs.realpathSync(p);
        }
        catch {
            return path.resolve(p);
        }
    };
    return real(a) === real(b);
}
class ProofError extends SidecarError {
    code = "EMEMTIERPROOF";
}
/**
 * Ask the server on `socket` (connected, nothing sent yet) to prove it is the sidecar `ep` names:
 * resolves when it did, rejects otherwise. Nothing but a random nonce is sent.
 */
function challenge(socket, ep, port, timeoutMs) {
    const nonce = randomBytes(32).toString("hex");
    return new Promise((resolve, reject) => {
        let buf = Buffer.alloc(0);
        const fail = (why) => {
            cleanup();
            reject(new ProofError(`the server on port ${port} is not this workspace's sidecar (${why})`));
        };
        const timer = setTimeout(() => fail(`no proof within ${timeoutMs} ms`), timeoutMs);
        timer.unref();
        const onData = (chunk) => {
            buf = Buffer.concat([buf, chunk]);
            if (buf.length > 16384)
                return fail("answer too long");
            const end = buf.indexOf("\r\n\r\n");
            if (end < 0)
                return;
            const head = buf.subarray(0, end).toString("latin1");
            const status = /^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1];
            const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
            if (status !== "200" || !Number.isFinite(len))
                return fail(`status ${status ?? "?"}`);
            if (buf.length < end + 4 + len)
                return;
            if (buf.length > end + 4 + len)
                return fail("more than one answer");
            let a;
            try {
                a = JSON.parse(buf.subarray(end + 4).toString("utf8"));
            }
            catch {
                return fail("answer is not JSON");
            }
            if (a.service !== "memtier" || typeof a.pid !== "number" || typeof a.workspace !== "string"
                || typeof a.proof !== "string" || a.port !== port)
                return fail("not a memtier answer for this port");
            if (ep.pid !== undefined && a.pid !== ep.pid)
                return fail(`pid ${a.pid}, expected ${ep.pid}`);
            if (ep.workspace !== undefined && !samePath(a.workspace, ep.workspace))
                return fail(`workspace ${a.workspace}`);
            const want = createHmac("sha256", ep.token)
                .update(`${CHALLENGE_PREFIX}\n${nonce}\n${a.pid}\n${a.workspace}\n${port}`).digest();
            const got = Buffer.from(a.proof, "hex");
            if (got.length !== want.length || !timingSafeEqual(got, want))
                return fail("wrong proof");
            cleanup();
            resolve();
        };
        const onEnd = () => fail("closed");
        const onError = (err) => fail(err.message);
        function cleanup() {
            clearTimeout(timer);
            socket.off("data", onData);
            socket.off("end", onEnd);
            socket.off("error", onError);
        }
        socket.on("data", onData);
        socket.on("end", onEnd);
        socket.on("error", onError);
        socket.write(`GET /v1/challenge?nonce=${nonce} HTTP/1.1\r\nHost: ${ep.url.host}\r\nConnection: keep-alive\r\n\r\n`);
    });
}
/**
 * An HTTP agent whose every new connection first passes the challenge: a request (token, content)
 * is only ever written to a socket whose server proved it is the sidecar `expect` names for its port.
 */
class ProvenAgent extends http.Agent {
    expect;
    constructor(expect) {
        super({ keepAlive: true, maxSockets: 32 });
        this.expect = expect;
    }
    createConnection(options, callback) {
        const done = (err, socket) => callback?.(err, socket);
        const port = Number(options.port);
        const ep = this.expect(port);
        if (!ep) {
            done(new ProofError(`no sidecar expected on port ${port}`));
            return undefined;
        }
        const socket = net.connect({ host: options.host ?? "127.0.0.1", port });
        socket.setNoDelay(true);
        const onError = (err) => {
            socket.destroy();
            done(err);
        };
        socket.once("error", onError);
        socket.once("connect", () => {
            socket.off("error", onError);
            const timeoutMs = Number(options.challengeTimeoutMs) || CHALLENGE_TIMEOUT_MS;
            challenge(socket, ep, port, timeoutMs).then(() => done(null, socket), (err) => {
                socket.destroy();
                done(err);
            });
        });
        return undefined;
    }
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
    /** What the server on each port must prove (token, pid, workspace); set before any request to it. */
    expected = new Map();
    agent = new ProvenAgent((port) => this.expected.get(port));
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
                const again = { ...ep, token: readToken(this.tokenPath) };
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
            // a fixed url gets the same challenge on every connection (the proof needs the token file's token)
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
    /**
     * The running sidecar endpoint.json names, once it proved itself and answered /health; else undefined.
     * A file of a dead pid, of another workspace, or of a server that fails the challenge is stale.
     */
    async discover(deadline) {
        let info;
        try {
            info = JSON.parse(fs.readFileSync(this.cfg.endpointFile, "utf8"));
        }
        catch {
            return undefined;
        }
        if (typeof info.url !== "string" || typeof info.pid !== "number" || typeof info.workspace !== "string") {
            return undefined;
        }
        if (!pidAlive(info.pid) || !samePath(info.workspace, this.cfg.workspace))
            return undefined;
        try {
            const tokenPath = typeof info.token_file === "string" ? info.token_file : this.cfg.tokenFile;
            const ep = { url: loopbackUrl(info.url), token: readToken(tokenPath), pid: info.pid,
                workspace: info.workspace };
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
            rotateLog(this.cfg.logFile);
            const { O_WRONLY, O_APPEND, O_CREAT, O_NOFOLLOW } = fs.constants;
            log = fs.openSync(this.cfg.logFile, O_WRONLY | O_APPEND | O_CREAT | (O_NOFOLLOW ?? 0), 0o600);
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
                    const ep = { url: loopbackUrl(ready.url), token: readToken(ready.token_file), pid: ready.pid,
                        workspace: ready.workspace };
                    finish(ep);
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
    /** Close the kept-alive connections to `port` (they were proven for another endpoint). */
    dropSockets(port) {
        for (const list of Object.values(this.agent.freeSockets)) {
            for (const s of list ?? [])
                if (s.remotePort === port)
                    s.destroy();
        }
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
        const port = Number(ep.url.port || 80);
        const known = this.expected.get(port);
        if (!known || known.token !== ep.token || known.pid !== ep.pid || known.workspace !== ep.workspace) {
            // what this port must prove changed: connections proven for the old one are not reused
            if (known)
                this.dropSockets(port);
            this.expected.set(port, ep);
        }
        const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
        return new Promise((resolve, reject) => {
            const options = {
                host: ep.url.hostname.replace(/^\[|\]$/g, ""), port: ep.url.port, path, method, agent: this.agent,
                // handed to ProvenAgent.createConnection: a new connection's challenge ends with this request's deadline
                challengeTimeoutMs: timeoutMs,
                headers: {
                    Authorization: `Bearer ${ep.token}`,
                    ...(data ? { "Content-Type": "application/json", "Content-Length": data.length } : {}),
                },
            };
            const req = http.request(options, (res) => {
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
