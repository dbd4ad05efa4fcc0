import { MemoryClient } from "rushmem";

// An app hosted off AWS (Vercel, Netlify, your own servers) has no AWS role to lend its calls.
// Two ways in, both from server code only (route handlers, server actions): never from the browser.

/** Per end user: the signed-in user's access token from your sign-in provider (the stack deployed with
 * ApiAuthorization=JWT and that provider as JwtIssuer, or COGNITO and the stack's pool). The user is
 * the token's `sub`: leave `user_id` out, and the API refuses any other user. */
export function memoryForUser(apiUrl: string, accessToken: () => string | Promise<string>): MemoryClient {
  return new MemoryClient(apiUrl, { token: accessToken });
}

/** One scoped key for the app's server (the stack deployed with ApiAuthorization=AWS_IAM): an IAM
 * access key whose only permission is execute-api:Invoke on this API, kept in the host's secret
 * environment. The app is then trusted to name the user: take `user_id` from its own session. */
export function memoryForServer(env: Record<string, string | undefined> = process.env): MemoryClient {
  const [apiUrl, accessKeyId, secretAccessKey] = [env.MEMORY_API_URL, env.MEMORY_ACCESS_KEY_ID, env.MEMORY_SECRET_ACCESS_KEY];
  if (!apiUrl || !accessKeyId || !secretAccessKey) {
    throw new Error("set MEMORY_API_URL, MEMORY_ACCESS_KEY_ID and MEMORY_SECRET_ACCESS_KEY");
  }
  return new MemoryClient(apiUrl, { auth: "iam", region: env.MEMORY_API_REGION, credentials: { accessKeyId, secretAccessKey } });
}

/** A route handler's part: the [RUSH_MEMORY] block for this session's user, for the system prompt. */
export async function memoryBlock(memory: MemoryClient, query: string, session: { userId?: string }): Promise<string> {
  const user_id = memory.auth === "jwt" ? undefined : session.userId; // a token names its own user
  const { prompt_block } = await memory.recall({ query, user_id });
  return prompt_block;
}
