"""A truthful GMP adapter over agent-memory's HTTP API, to run GRAFOMEM's conformance suite
(``pip install grafomem==0.4.2``, MIT) against `agent-memory serve` or a deployed stack.

Each store the suite asks for is a fresh namespace of user ids (one per GMP tenant): nothing is
shared between stores, and nothing is claimed that the API does not do. How to run it:
docs/reliability.md ("GRAFOMEM conformance").
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

from aml.backends.interface import (  # type: ignore[import-not-found]
    Capability,
    CapabilityNotSupported,
    Memory,
    RetrieveOptions,
    SourceMeta,
    WriteOptions,
)

from agent_memory_client import MemoryClient
from agent_memory_contract.errors import NotFound

API = os.environ.get("AGENT_MEMORY_API_URL", "http://127.0.0.1:8080")
Ref = tuple[str, str]  # (tenant, memory id)


class AgentMemoryStore:
    __grafomem_interface__ = "0.2"

    def __init__(self, client: MemoryClient) -> None:
        self.client = client
        self.prefix = f"gmp-{uuid.uuid4().hex[:12]}"
        self.tenants: set[str] = set()

    def capabilities(self) -> set[Capability]:
        # PROVENANCE (a write id per write) is not on this branch; CONCURRENCY_CONTROL and the
        # cryptographic capabilities are not offered.
        return {
            Capability.AUDIT,
            Capability.SUPERSESSION_CHAIN,
            Capability.BI_TEMPORAL,
            Capability.HARD_DELETE,
            Capability.MULTI_TENANT,
            Capability.POINT_LOOKUP,
        }

    def _user(self, tenant: str) -> str:
        self.tenants.add(tenant)
        return f"{self.prefix}-{tenant}"

    def write(self, content: str, options: WriteOptions) -> Ref:
        if options.signing_identity is not None:
            raise CapabilityNotSupported(Capability.CRYPTOGRAPHIC_PROVENANCE, "write")
        tenant = options.tenant_id or "default"
        memory = {"content": content, "metadata": dict(options.metadata)}
        stored = self.client.add([memory], user_id=self._user(tenant), valid_from=options.valid_from)
        return (tenant, str(stored.ids[0]))

    def supersede(self, old_ref: Ref, content: str, options: WriteOptions) -> Ref:
        tenant, old = old_ref
        memory = {"content": content, "metadata": dict(options.metadata)}
        stored = self.client.add([memory], user_id=self._user(tenant), supersedes=[old], valid_from=options.valid_from)
        return (tenant, str(stored.ids[0]))

    def delete(self, ref: Ref) -> bool:
        tenant, memory_id = ref
        return self.client.forget_memory(memory_id, user_id=self._user(tenant))

    def exists(self, ref: Ref) -> bool:
        tenant, memory_id = ref
        try:
            self.client.get_memory(memory_id, user_id=self._user(tenant), consistency="strong")
        except NotFound:
            return False
        return True

    def retrieve(self, query: str, options: RetrieveOptions) -> list[Memory]:
        tenant = options.tenant_id or "default"
        limit = min(50, options.top_k or 50)
        found = self.client.recall(
            query or " ", user_id=self._user(tenant), limit=limit, as_of=options.as_of, consistency="strong"
        )
        out: list[Memory] = []
        used = 0
        for m in found.memories:  # the budget is in characters, the tail dropped
            if used + len(m.content) > options.budget_tokens:
                break
            used += len(m.content)
            out.append(
                Memory(
                    ref=(tenant, str(m.id)),
                    content=m.content,
                    written_at=m.created_at,
                    metadata=dict(m.metadata or {}),
                    tenant_id=options.tenant_id,
                )
            )
        return out

    def audit(self) -> Iterator[Memory]:
        for tenant in sorted(self.tenants):
            for line in self.client.export_memories(user_id=self._user(tenant), consistency="strong"):
                yield Memory(
                    ref=(tenant, str(line.id)),
                    content=line.content,
                    written_at=line.created_at,
                    metadata=dict(line.metadata or {}),
                    valid_from=line.valid_from,
                    valid_until=line.valid_until,
                    tenant_id=None if tenant == "default" else tenant,
                    superseded_by=line.superseded_by,
                    source=SourceMeta(written_at=line.created_at),
                )

    def flush(self) -> None:
        """Every write is committed when its request answers."""


def main() -> None:
    from aml.eval.conformance import print_profile, run_conformance  # type: ignore[import-not-found]

    client = MemoryClient(API, auth="none", timeout=60)
    print_profile(run_conformance(lambda: AgentMemoryStore(client), name="agent-memory (HTTP)"))


if __name__ == "__main__":
    main()
