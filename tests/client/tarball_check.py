"""`make tarball-check`: the npm tarball (`make npm-pack`) installed alone in a fresh app outside the
checkout, as an app deployed from its own repository installs it, runs the README's TypeScript example.

The app gets the tarball and, from the npm registry, what the README says to install beside it (`ai`)
plus its own TypeScript, at the versions the package is developed against (its
devDependencies). The README's ```ts block is compiled by the app's `tsc` (strict, NodeNext) and run
against `rushmem serve` (this venv's, a fresh embedded database, the hash embedder and the rules
extractor) with the AI SDK's mock model: the recalled memory reaches the model's system prompt, the
ended conversation reaches the write path and is recalled.

Usage: python tests/client/tarball_check.py dist/rushmem-0.1.0.tgz. Prints one line per check and
exits non-zero on the first failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "typescript"
# What the README's example imports beside `rushmem`, and the app's own compiler.
APP_DEPENDENCIES = ("ai", "typescript", "@types/node")

TSCONFIG = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "strict": True,
        "outDir": "dist",
        "skipLibCheck": True,  # as apps do: the dependencies' own .d.ts are theirs to check
    },
    "include": ["src"],
}

# The app's entry point: the example's two functions, the AI SDK's mock model in place of a real one.
MAIN = """
import { MockLanguageModelV3 } from "ai/test";
import { MemoryClient } from "rushmem";
import { answer, conversationEnded } from "./dist/answer.js";

const memory = new MemoryClient(process.env.MEMORY_API_URL);
await memory.add({ memories: [{ content: "The user prefers TypeScript" }], user_id: "u-1", project_id: "svg-editor" });
const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const model = new MockLanguageModelV3({
  doGenerate: async () => ({ content: [{ type: "text", text: "Use TypeScript." }],
    finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }),
});
const reply = await answer(model, "u-1", [{ role: "user", content: "Which language for the plugin?" }]);
const system = model.doGenerateCalls[0].prompt.filter((m) => m.role === "system").map((m) => m.content);
const ended = await conversationEnded("u-2", "c-1", [
  { role: "user", content: "My name is Ana and I work on the SVG editor." },
  { role: "assistant", content: "Nice to meet you, Ana." },
]);
const recalled = await memory.recall({ query: "What is the user's name?", user_id: "u-2", project_id: "svg-editor" });
console.log(JSON.stringify({ reply, system, status: ended.status, recalled: recalled.memories.map((m) => m.content) }));
"""


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def readme_example() -> str:
    """The README's TypeScript block, the one that imports the package."""
    blocks: list[str] = re.findall(r"```ts\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    [example] = [block for block in blocks if 'from "rushmem"' in block]
    return example


def start_serve(work: Path) -> tuple[subprocess.Popen[str], str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_"))},
        "RUSHMEM_DATA_DIR": str(work / "pgdata"),
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_LLM_PROVIDER": "rules",
    }
    log = (work / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "rushmem_tools", "serve", "--port", "0", "--no-page"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    assert serve.stdout is not None
    line = serve.stdout.readline()
    assert line, (work / "serve.log").read_text()
    return serve, str(json.loads(line)["url"])


def main(tarball: str) -> int:
    versions = json.loads((PACKAGE / "package.json").read_text())["devDependencies"]
    with tempfile.TemporaryDirectory(prefix="rushmem-tarball-check-") as tmp:
        app = Path(tmp) / "app"
        (app / "src").mkdir(parents=True)
        assert not app.resolve().is_relative_to(ROOT), "the check must run outside the checkout"
        (app / "package.json").write_text(json.dumps({"name": "fresh-app", "private": True, "type": "module"}))
        (app / "tsconfig.json").write_text(json.dumps(TSCONFIG))
        _run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", str(Path(tarball).resolve()),
             *(f"{name}@{versions[name]}" for name in APP_DEPENDENCIES)],
            app,
        )  # fmt: skip
        installed = (app / "node_modules" / "rushmem").resolve()
        assert not installed.is_relative_to(ROOT) and (installed / "dist" / "index.js").is_file(), installed
        print(f"tarball-check: {Path(tarball).name} installed alone in a fresh app, with {', '.join(APP_DEPENDENCIES)}")

        (app / "src" / "answer.ts").write_text(readme_example())
        _run([str(app / "node_modules" / ".bin" / "tsc"), "-p", "."], app)
        print("tarball-check: the README's TypeScript example compiles (strict, NodeNext)")

        (app / "main.mjs").write_text(MAIN)
        serve, url = start_serve(Path(tmp))
        try:
            out = json.loads(_run(["node", "main.mjs"], app, {**os.environ, "MEMORY_API_URL": url}).splitlines()[-1])
        except Exception:
            sys.stderr.write((Path(tmp) / "serve.log").read_text())
            raise
        finally:
            serve.terminate()
            serve.wait(timeout=60)
        assert out["reply"] == "Use TypeScript.", out
        assert out["system"] and out["system"][0].startswith("[RUSH_MEMORY]"), out
        assert "The user prefers TypeScript" in out["system"][0], out
        assert out["status"] == "stored" and any("Ana" in text for text in out["recalled"]), out
        print(f"tarball-check: the example runs against serve on {url}: recalled into the prompt, conversation stored")
    print("tarball-check: 3 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
