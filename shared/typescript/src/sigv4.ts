// SigV4 for IAM callers (API Gateway's AWS_IAM authorizer), with the AWS SDK's own signer, loaded
// only when a client signs: @smithy/signature-v4 and @aws-crypto/sha256-js are optional peers, and so
// is @aws-sdk/credential-provider-node (the default credential chain) when no credentials are given.
import { ConfigurationError } from "./errors.js";

/** AWS credentials, as the AWS SDK spells them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}
export type CredentialsProvider = () => Promise<AwsCredentials>;

interface Signer {
  sign(request: unknown): Promise<{ headers: Record<string, string> }>;
}

async function load<T>(name: string, what: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (cause) {
    throw new ConfigurationError(`${what} needs the optional package ${name}: npm install ${name}`, { cause });
  }
}

export class SigV4Signer {
  private signer: Promise<Signer> | undefined;

  constructor(
    readonly region: string,
    private readonly credentials?: AwsCredentials | CredentialsProvider,
  ) {}

  private async create(): Promise<Signer> {
    const [{ SignatureV4 }, { Sha256 }] = await Promise.all([
      load<typeof import("@smithy/signature-v4")>("@smithy/signature-v4", "auth 'iam'"),
      load<typeof import("@aws-crypto/sha256-js")>("@aws-crypto/sha256-js", "auth 'iam'"),
    ]);
    let credentials = this.credentials;
    if (credentials === undefined) {
      const { defaultProvider } = await load<typeof import("@aws-sdk/credential-provider-node")>(
        "@aws-sdk/credential-provider-node",
        "auth 'iam' without credentials",
      );
      // The chain caches what it found and renews expiring credentials (roles, SSO) itself.
      const chain = defaultProvider();
      credentials = async () => {
        try {
          return await chain();
        } catch (cause) {
          throw new ConfigurationError("auth 'iam' needs AWS credentials (none found in the default credential chain)", { cause });
        }
      };
    }
    return new SignatureV4({ service: "execute-api", region: this.region, credentials, sha256: Sha256 }) as Signer;
  }

  /** The headers that sign this request (authorization, x-amz-date, x-amz-security-token, ...). */
  async sign(method: string, url: string, headers: Record<string, string>, body: string): Promise<Record<string, string>> {
    this.signer ??= this.create();
    const signer = await this.signer.catch((error: unknown) => {
      this.signer = undefined; // a missing package or credentials may be fixed; do not cache the failure
      throw error;
    });
    const target = new URL(url);
    const query: Record<string, string> = {};
    target.searchParams.forEach((value, key) => {
      query[key] = value;
    });
    const signed = await signer.sign({
      method,
      protocol: target.protocol,
      hostname: target.hostname,
      port: target.port ? Number(target.port) : undefined,
      path: target.pathname,
      query,
      headers: { ...headers, host: target.host },
      body,
    });
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers)) {
      // fetch sets Host itself (the same value, which is what was signed).
      if (name.toLowerCase() !== "host" && !(name.toLowerCase() in headers)) out[name.toLowerCase()] = value;
    }
    return out;
  }
}
