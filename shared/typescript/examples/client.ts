import { MemoryClient, NotFound } from "rushmem";

// `rushmem serve` locally; in AWS the API's execute-api URL (SigV4) or { token } (JWT: user_id left out).
const memory = new MemoryClient(process.env.MEMORY_API_URL ?? "http://127.0.0.1:8080");

export async function tour(user_id: string) {
  // Each method takes its operation's request: every input, path fields included, by its wire name.
  const { ids } = await memory.add({ memories: "The user prefers TypeScript", user_id });
  await memory.add({ memories: ["The user deploys with SAM", { content: "Every SVG change syncs to defaultSVG", category: "decision" }], user_id });
  const { prompt_block } = await memory.recall({ query: "Which language?", user_id, limit: 5 });
  const decisions = await memory.list({ user_id, filters: { categories: ["decision"] } }); // a page
  const updated = await memory.update({ memory_id: ids[0]!, user_id, content: "The user prefers TypeScript, strict" });
  await memory.delete({ memory_id: ids[0]!, user_id }); // nothing back (204); NotFound once gone
  const gone = await memory.get({ memory_id: ids[0]!, user_id }).catch((e: unknown) => (e instanceof NotFound ? null : Promise.reject(e)));
  const all = [];
  for await (const m of memory.pages("list", { user_id })) all.push(m); // every page, next_cursor followed
  return { prompt_block, decisions: decisions.memories, updated, gone, all };
}
