// The middleware's tests and the README's example, copied from the package into .work/ with
// ai-major.ts (ai 7) in place of test/ai-major.ts (ai 6), so that tsc and Node resolve `ai` and
// `@ai-sdk/provider` from this folder's node_modules (ai 7). `rushmem` resolves to the package
// itself (its dist/, built first) through a link node_modules/rushmem -> the package: no copy of it.
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = dirname(here);
if (!existsSync(join(pkg, "dist", "index.js"))) {
  console.error("shared/typescript/dist is missing: run `npm run build` in shared/typescript first");
  process.exit(1);
}
const work = join(here, ".work");
rmSync(work, { recursive: true, force: true });
rmSync(join(here, ".test-build"), { recursive: true, force: true });
mkdirSync(join(work, "test"), { recursive: true });
mkdirSync(join(work, "examples"), { recursive: true });
for (const file of ["ai-sdk.test.ts", "support.ts"]) cpSync(join(pkg, "test", file), join(work, "test", file));
cpSync(join(pkg, "examples", "ai-sdk.ts"), join(work, "examples", "ai-sdk.ts"));
cpSync(join(here, "ai-major.ts"), join(work, "test", "ai-major.ts"));
const link = join(here, "node_modules", "rushmem");
rmSync(link, { recursive: true, force: true });
symlinkSync("../..", link, "dir");
