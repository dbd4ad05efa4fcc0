// publishConversationEnded with the AWS SDK's own SQSClient, against a stand-in SQS endpoint on
// 127.0.0.1 that answers SendMessage as SQS does (JSON protocol, the body's MD5, its error shapes);
// the body it received is then what the write path of a real `rushmem serve` takes.
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { SQSClient } from "@aws-sdk/client-sqs";
import { ConfigurationError, InvalidInput, MemoryClient, ServiceUnavailable, WIRE_LIMITS, publishConversationEnded, rememberConversation } from "rushmem";
import { startServe, type Serve } from "./support.js";

interface Sent {
  target: string;
  body: { QueueUrl: string; MessageBody: string; MessageGroupId?: string; MessageDeduplicationId?: string };
}

let serve: Serve;
let sqsServer: Server;
let endpoint: string;
const sent: Sent[] = [];
let failWith: [number, string] | undefined;

before(async () => {
  serve = await startServe();
  sqsServer = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      res.setHeader("content-type", "application/x-amz-json-1.0");
      if (failWith) {
        res.statusCode = failWith[0];
        res.end(JSON.stringify({ __type: `com.amazonaws.sqs#${failWith[1]}`, message: "refused by the stand-in" }));
        return;
      }
      const body = JSON.parse(raw) as Sent["body"];
      sent.push({ target: String(req.headers["x-amz-target"]), body });
      const md5 = createHash("md5").update(body.MessageBody).digest("hex");
      res.end(JSON.stringify({ MessageId: randomUUID(), MD5OfMessageBody: md5 }));
    });
  });
  await new Promise<void>((resolve) => sqsServer.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(sqsServer.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise<void>((resolve) => sqsServer.close(() => resolve()));
  await serve?.stop();
});

function sqs(): SQSClient {
  return new SQSClient({
    region: "eu-west-1",
    endpoint,
    credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" },
    maxAttempts: 1,
  });
}

test("a FIFO message: the user as group, the conversation as deduplication id; the body is the write path's", async () => {
  const queueUrl = `${endpoint}/123456789012/agent-memory-ingest.fifo`;
  const id = await publishConversationEnded(
    queueUrl,
    {
      user_id: "q-user",
      conversation_id: "c-q-1",
      project_id: "svg-editor",
      messages: [
        { role: "user", content: "I prefer Tailwind for styling." },
        { role: "assistant", content: "Tailwind it is." },
      ],
    },
    { sqs: sqs() },
  );
  assert.ok(id);
  const [message] = sent.splice(0);
  assert.equal(message?.target, "AmazonSQS.SendMessage");
  assert.equal(message?.body.QueueUrl, queueUrl);
  assert.equal(message?.body.MessageGroupId, "q-user");
  assert.equal(message?.body.MessageDeduplicationId, createHash("sha256").update("c-q-1").digest("hex"));
  // What the queue carries, the write path takes (POST /conversations is the same message).
  const answer = await fetch(`${serve.url}/conversations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: message!.body.MessageBody,
  });
  assert.equal(answer.status, 200, await answer.clone().text());
  assert.equal(((await answer.json()) as { status: string }).status, "stored");
  const recalled = await new MemoryClient(serve.url).recall({ query: "Which CSS framework?", user_id: "q-user", project_id: "svg-editor" });
  assert.ok(recalled.memories.some((m) => /Tailwind/.test(m.content)), JSON.stringify(recalled.memories));
});

test("rememberConversation to a queue; a standard queue gets no FIFO attributes", async () => {
  const queueUrl = `${endpoint}/123456789012/agent-memory-ingest`;
  await rememberConversation({ queueUrl, sqs: sqs() }, { user_id: "q-user", messages: [{ role: "user", content: [{ type: "text", text: "I use Neovim." }] }] });
  const [message] = sent.splice(0);
  assert.equal(message?.body.MessageGroupId, undefined);
  assert.deepEqual(JSON.parse(message!.body.MessageBody), { user_id: "q-user", messages: [{ role: "user", content: "I use Neovim." }] });
});

test("a message the consumer would refuse is refused here, and nothing is sent", async () => {
  const queueUrl = `${endpoint}/123456789012/q`;
  await assert.rejects(publishConversationEnded(queueUrl, { user_id: "u", messages: [] }, { sqs: sqs() }), (e: unknown) => e instanceof InvalidInput && e.field === "messages");
  await assert.rejects(publishConversationEnded(queueUrl, { user_id: "", messages: [{ role: "user", content: "x" }] }, { sqs: sqs() }), (e: unknown) => e instanceof InvalidInput && e.field === "user_id");
  const long = "x".repeat(WIRE_LIMITS.messageMaxChars) + "é";
  await assert.rejects(publishConversationEnded(queueUrl, { user_id: "u", messages: [{ role: "user", content: long }] }, { sqs: sqs() }), (e: unknown) => e instanceof InvalidInput && e.field === "messages[0].content");
  await assert.rejects(publishConversationEnded(queueUrl, { user_id: "u", messages: [{ role: "robot" as never, content: "x" }] }, { sqs: sqs() }), (e: unknown) => e instanceof InvalidInput && e.field === "messages[0].role");
  await assert.rejects(publishConversationEnded(queueUrl, { user_id: "u", memories: [{ content: " " }] }, { sqs: sqs() }), (e: unknown) => e instanceof InvalidInput && e.field === "memories[0].content");
  assert.equal(sent.length, 0);
  // The limit is the service's: serve refuses the same message.
  const fits = new MemoryClient(serve.url);
  await assert.rejects(fits.ingestConversation({ messages: [{ role: "user", content: long }], user_id: "u" }), InvalidInput);
  const answer = await fetch(`${serve.url}/conversations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ user_id: "u", messages: [{ role: "user", content: long }] }),
  });
  assert.ok([400, 413].includes(answer.status), `serve refuses it too (${answer.status})`);
});

test("SQS errors come back as the service's kinds", async () => {
  const queueUrl = `${endpoint}/123456789012/q`;
  const message = { user_id: "u", messages: [{ role: "user" as const, content: "I use Neovim." }] };
  try {
    failWith = [400, "QueueDoesNotExist"];
    await assert.rejects(publishConversationEnded(queueUrl, message, { sqs: sqs() }), ConfigurationError);
    failWith = [500, "InternalError"];
    await assert.rejects(publishConversationEnded(queueUrl, message, { sqs: sqs() }), ServiceUnavailable);
    failWith = [400, "InvalidMessageContents"];
    await assert.rejects(publishConversationEnded(queueUrl, message, { sqs: sqs() }), InvalidInput);
  } finally {
    failWith = undefined;
  }
});
