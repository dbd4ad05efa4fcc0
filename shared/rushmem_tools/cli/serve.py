"""``rushmem serve`` and ``rushmem openapi``: the local HTTP API (:mod:`rushmem_tools.local.server`)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from rushmem.service import Memory, set_service
from rushmem_contract.errors import AgentMemoryError, InvalidInput
from rushmem_tools.cli.output import AddCommand, emit
from rushmem_tools.local.stack import TEMPLATE_HELP, template_path

logger = logging.getLogger("rushmem.serve")


def _warm_up(service: Memory) -> None:
    """Open the connection and load the embedder now, as a provisioned container would."""
    try:
        service.admin.embedder.embed_query("warm up")
        service.admin.db.connection()
    except AgentMemoryError as exc:
        logger.warning("warm-up failed (requests will answer with the error): %s", exc)


def _quiet_handlers() -> None:
    """On a terminal: the access lines only, not the handler's JSON logs and metrics (-v shows them)."""
    from rushmem.observability import logger as handler_logger
    from rushmem_tools.local.runtime import QUIET_HANDLERS

    for name, value in QUIET_HANDLERS.items():
        os.environ.setdefault(name, value)
    handler_logger.setLevel(os.environ["POWERTOOLS_LOG_LEVEL"])


def _reapply_erasures(service: Memory) -> None:
    """Before the first request: a database restored from before an erasure forgets again (the
    erasure ledger; in AWS the deploy's MigrateFunction does it, and the functions never migrate)."""
    if service.settings.auto_migrate:
        for admin in service.cell_admins().values():
            admin.reapply_erasures()


def cmd_serve(service: Memory, args: argparse.Namespace) -> int:
    # Imported here: the HTTP server and the template reader cost the other commands ~0.1 s.
    from rushmem_tools.local.server import LocalApi, is_loopback_name, make_server

    logger.setLevel(logging.INFO)  # one access line per request on stderr
    if sys.stderr.isatty() and not args.verbose:
        _quiet_handlers()
    overrides: dict[str, object] = {}
    # GET /openapi.json and /docs, and the memory page at GET / on the local server (off by default in AWS).
    if not args.no_docs:
        overrides["api_docs"] = True
    if not args.no_page:
        overrides["web_page"] = True
    verifier = None
    if args.jwt_issuer:
        from rushmem_tools.local.tokens import JwtVerifier

        audiences = [a.strip() for value in args.jwt_audience or [] for a in value.split(",")]
        verifier = JwtVerifier(args.jwt_issuer, audiences)
        verifier.discover()  # a wrong issuer stops here, not at the first request
        # The OAuth metadata names this issuer, as the stack's names its own.
        overrides["oauth_issuer"] = verifier.issuer
        facade = verifier.facade_endpoints()
        if facade:
            overrides["oauth_authorization_endpoint"], overrides["oauth_token_endpoint"] = facade
    elif args.jwt_audience:
        raise InvalidInput("--jwt-audience goes with --jwt-issuer", field="jwt_audience")
    if overrides:
        service = Memory(service.settings.model_copy(update=overrides))
    set_service(service)  # the handler runs on this command's settings
    api = LocalApi(template_path(args.template), unverified_jwt=args.unverified_jwt, verifier=verifier)
    api.load()
    allowed_hosts = _listed(args.allow_host)
    allowed_origins = _listed(args.allow_origin)
    # Bound before the warm-up: a port in use is said at once, not after the model has loaded.
    try:
        server = make_server(api, args.host, args.port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise InvalidInput(
            f"port {args.port} on {args.host} is already in use (another rushmem serve?): "
            "stop that server, choose another --port, or --port 0 for any free port",
            field="--port",
        ) from None
    # Bound but not yet answering (requests wait in the listen backlog until serve_forever): a
    # restored database forgets its erased users before the first answer, and a port in use was
    # said before the database was touched.
    _reapply_erasures(service)
    if not args.no_warm:
        _warm_up(service)
    host, port = args.host, server.server_port
    if not is_loopback_name(args.host) and verifier is None:
        logger.warning(
            "serving on %s: this server checks no signature or token; anyone who can reach it can read "
            "and delete every user's memories (--jwt-issuer makes every request show a verified token); it answers "
            "only loopback names and %s as Host (--allow-host adds the names others use to reach it)",
            args.host,
            args.host,
        )
    if "*" in allowed_hosts:
        logger.warning(
            "--allow-host '*': any Host is answered, so a web page can reach this server by DNS rebinding; "
            "name the hosts instead"
        )
    if threading.current_thread() is threading.main_thread():
        # A plain `kill` should stop cleanly too (the embedded PostgreSQL is released at exit).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    emit(
        {
            "url": f"http://{host}:{port}",
            "function": api.spec.logical_id,
            "unverified_jwt": args.unverified_jwt,
            "jwt_issuer": verifier.issuer if verifier else None,
            "mcp": f"http://{host}:{port}/mcp",
            "docs": None if args.no_docs else f"http://{host}:{port}/docs",
            "page": None if args.no_page else f"http://{host}:{port}/",
        }
    )
    print(f"rushmem: serving {api.spec.logical_id} on http://{host}:{port} (Ctrl-C stops)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _listed(values: list[str] | None) -> list[str]:
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def cmd_openapi(service: Memory, args: argparse.Namespace) -> int:
    from rushmem_tools.local.server import openapi_document

    document = openapi_document(template_path(args.template))
    if args.out:
        Path(args.out).write_text(document + "\n", encoding="utf-8")
        print(f"rushmem: wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(document + "\n")
    return 0


def register(add: AddCommand) -> None:
    """Adds ``serve`` and ``openapi`` through cli.build_parser's ``add`` helper."""
    p = add("serve", cmd_serve, "serve the HTTP API locally (RecallFunction via lambda_local; no Docker, no AWS)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--template", help=TEMPLATE_HELP)
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="also answer requests whose Host is NAME (repeatable, or comma-separated; '*': any). By default only "
        "loopback names (localhost, 127.0.0.1, [::1]) and the --host address: a web page that re-points its own "
        "name at this machine (DNS rebinding) is refused",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also accept browser requests from ORIGIN (scheme://host[:port], e.g. a TLS proxy's "
        "https://memory.example.com; repeatable, or comma-separated). By default only the server's own origin",
    )
    p.add_argument(
        "--unverified-jwt",
        action="store_true",
        help="pass the claims of an 'Authorization: Bearer' JWT to the function WITHOUT verifying it "
        "(local testing of the JWT path only)",
    )
    p.add_argument(
        "--jwt-issuer",
        metavar="URL",
        help="require a bearer token from this OIDC issuer on every request, verified against its JWKS as the "
        "stack's JWT authorizer does (its /.well-known/openid-configuration must be reachable); MCP hosts find it "
        "at /.well-known/oauth-protected-resource/mcp",
    )
    p.add_argument(
        "--jwt-audience",
        action="append",
        metavar="AUD",
        help="an accepted audience (the token's aud, or client_id when it has none); repeatable, or comma-separated",
    )
    p.add_argument("--no-warm", action="store_true", help="do not connect and load the embedder before serving")
    p.add_argument("--no-docs", action="store_true", help="no GET /openapi.json and /docs (the Swagger page)")
    p.add_argument("--no-page", action="store_true", help="no memory page at GET / (to see and manage memories)")

    p = add("openapi", cmd_openapi, "write the OpenAPI document of the HTTP API")
    p.add_argument("--out", help="file to write (default stdout)")
    p.add_argument("--template", help=TEMPLATE_HELP)
