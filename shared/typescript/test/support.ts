// What the tests share: the repository, its Python, and a real `rushmem serve` on a fresh
// embedded PostgreSQL (hash embedder, rules extractor), started on a free port and stopped after.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

function upTo(marker: string): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, marker))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no ${marker} above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

/** The repository (where template.yaml is) and this package (named from the repository: the tests
 * also run compiled from ai7/, whose package.json is not the package's). */
export const ROOT = upTo("template.yaml");
export const PACKAGE = join(ROOT, "shared", "typescript");

/** The Python that runs the service: RUSHMEM_PYTHON (or its old name AGENT_MEMORY_PYTHON), else the
 * checkout's .venv (make test makes it). */
export const PYTHON = process.env.RUSHMEM_PYTHON ?? process.env.AGENT_MEMORY_PYTHON ?? join(ROOT, ".venv", "bin", "python");

/** The environment of a Python process: this checkout's packages first. */
export function pythonEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const shared = join(ROOT, "shared");
  const path = process.env.PYTHONPATH ? `${shared}:${process.env.PYTHONPATH}` : shared;
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: path, PYTHONUNBUFFERED: "1", ...extra };
  delete env.RUSHMEM_DATABASE_URL;
  delete env.AGENT_MEMORY_DATABASE_URL;
  return env;
}

export interface Serve {
  url: string;
  stop(): Promise<void>;
  log(): string;
}

/** `rushmem serve --port 0` on a database of its own; resolves once it listens, warmed up (connected and
 * migrated, the embedder loaded), so that no test's first request pays for the start under a busy CPU. */
export async function startServe(args: string[] = []): Promise<Serve> {
  const data = mkdtempSync(join(tmpdir(), "rushmem-test-"));
  const logFile = join(data, "serve.log");
  const child: ChildProcessWithoutNullStreams = spawn(
    PYTHON,
    ["-m", "rushmem_tools", "serve", "--port", "0", "--no-page", ...args],
    {
      cwd: ROOT,
      env: pythonEnv({
        RUSHMEM_DATA_DIR: join(data, "pgdata"),
        RUSHMEM_EMBEDDING_PROVIDER: "hash",
        RUSHMEM_LLM_PROVIDER: "rules",
      }),
    },
  );
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => {
      try {
        resolve((JSON.parse(line) as { url: string }).url);
      } catch (error) {
        reject(new Error(`serve printed ${line}: ${String(error)}\n${stderr}`));
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited (${code}) before listening:\n${stderr}`)));
  });
  return {
    url,
    log: () => stderr,
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
      rmSync(data, { recursive: true, force: true });
      void logFile;
    },
  };
}

/** Run the checkout's Python on `code` (stdin), its stdout back. */
export async function runPython(code: string, input = ""): Promise<string> {
  const child = spawn(PYTHON, ["-c", code], { cwd: ROOT, env: pythonEnv() });
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  child.stdin.end(input);
  const code_ = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code_ !== 0) throw new Error(`python failed (${code_}):\n${err}`);
  return out;
}

export function readText(path: string): string {
  return readFileSync(path, "utf8");
}
