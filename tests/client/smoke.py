"""Run by `make client-check` in a venv holding only the client's distribution (`pip install ./shared`,
no extras): the client imports and works against a running `rushmem serve` without any of
the server's dependencies. Usage: python tests/client/smoke.py URL"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
from pathlib import Path


def main(url: str) -> int:
    present = [m for m in ("psycopg", "numpy", "aws_lambda_powertools", "torch", "pydantic_settings", "pgvector")
               if importlib.util.find_spec(m) is not None]  # fmt: skip
    assert not present, f"the client's install pulled in server dependencies: {present}"
    server = [m for m in ("rushmem", "rushmem_tools") if importlib.util.find_spec(m) is not None]
    assert not server, f"the client's install ships server code: {server}"
    script = shutil.which("rushmem", path=str(Path(sys.executable).parent))
    assert script is None, f"the client's install ships the server's command: {script}"

    from rushmem_client import AsyncMemoryClient, MemoryClient
    from rushmem_contract.errors import NotFound

    client = MemoryClient(url)  # auth from the URL: none for localhost
    stored = client.add(["Prefers pnpm", {"content": "Lives in Lisbon", "metadata": {"k": 1}}], user_id="smoke")
    assert client.recall("pnpm", user_id="smoke").memories[0].content == "Prefers pnpm"
    assert len(client.list(user_id="smoke").memories) == 2
    assert client.get(stored.ids[1], user_id="smoke").metadata == {"k": 1}
    assert client.update(stored.ids[1], user_id="smoke", content="Lives in Porto").content == "Lives in Porto"
    exported = list(client.pages(client.export, user_id="smoke"))
    # The edit kept the old text as a version valid until it (a content edit never rewrites the past).
    assert len(exported) == 3 and sum(line.superseded_by is None for line in exported) == 2
    try:
        client.get(stored.ids[0], user_id="someone-else")
    except NotFound:
        pass
    else:
        raise AssertionError("another user's memory was visible")

    async def recall() -> str:
        async with AsyncMemoryClient(url) as aclient:
            return (await aclient.recall("Porto", user_id="smoke", filters={"metadata": {"k": 1}})).memories[0].content

    assert asyncio.run(recall()) == "Lives in Porto"
    client.forget_user("smoke")
    print("client smoke: 8 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
