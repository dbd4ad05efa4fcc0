"""A client for agent backends: the memory API over HTTP (:class:`MemoryClient`), and the
write-path message to SQS (:func:`publish_conversation_ended`).

    client = MemoryClient("https://abc123.execute-api.eu-west-1.amazonaws.com")  # AWS_IAM: SigV4 (from the URL)
    local = MemoryClient("http://127.0.0.1:8080")  # `rushmem serve`: no auth (from the URL)
    block = client.recall("Which package manager?", user_id="u1").prompt_block
    ...
    publish_conversation_ended(queue_url, user_id="u1", messages=chat)

Errors are the service's own types (rushmem_contract.errors): InvalidInput (400, with the field),
InputTooLarge (413), Forbidden (401/403), NotFound (404), DatabaseUnavailable (503),
ServiceUnavailable (unreachable, timed out, 429 or other 5xx after the retries), ConfigurationError
(no credentials or region, wrong API URL), Conflict (409, an update that would repeat another
memory, or a review of a write decided already). :class:`AsyncMemoryClient` has the same methods for
asyncio. Needs pydantic, httpx and tenacity (the distribution rushmem-client: ``pip install
./shared`` from the repository; boto3 for IAM signing and SQS: ``rushmem-client[aws]``); nothing of
the server.
"""

from rushmem_client.aio import AsyncMemoryClient
from rushmem_client.http import MemoryClient
from rushmem_client.sqs import publish_conversation_ended

__all__ = ["AsyncMemoryClient", "MemoryClient", "publish_conversation_ended"]
