"""`peakline serve [--db URL] [--host H] [--port P] [--data-dir DIR]`: the validation server
(peakline.server, docs/server.md); `peakline serve token create NAME`: a write token.

The server listens on a socket bound here, before uvicorn starts, so ``--port 0`` picks a free
port and the line printed on standard error names the real one.
"""

from __future__ import annotations

import argparse
import socket
import sys

from peakline.errors import UsageError

DEFAULT_PORT = 8765


def _database_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", default=None,
                        help="postgresql://USER:PASSWORD@HOST:PORT/NAME for a team's server; "
                             "default: an SQLite file in --data-dir")
    parser.add_argument("--data-dir", metavar="DIR", default=None,
                        help="where the SQLite database lives (default ./peakline-data)")


def _error(prog: str):
    def raise_usage(message: str):
        raise UsageError(f"{message} (see `{prog} --help`)")
    return raise_usage


def _need_extra():
    try:
        import alembic  # noqa: F401
        import jinja2  # noqa: F401
        import numpy  # noqa: F401
        import sqlalchemy  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise UsageError(f"peakline serve needs the server extra ({error.name} is missing): "
                         "pip install 'peakline[server]'") from None


def main(argv: list[str]) -> int:
    if argv[:1] == ["token"]:
        return token_main(argv[1:])
    from peakline.cli.options import byte_size

    parser = argparse.ArgumentParser(
        prog="peakline serve",
        description="Run the validation server: stores pushed profiles with their verdicts, "
                    "budgets per model, the deployment verdict API, the co-location planner "
                    "and the web UI. `peakline serve token create NAME` makes a write token.")
    _database_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on "
                                                            "(default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--max-upload", metavar="SIZE", default="64MiB", type=byte_size,
                        help="largest accepted upload after decompression (default 64MiB)")
    parser.add_argument("--auth-reads", action="store_true",
                        help="reads need a token too (default: only writes do)")
    parser.error = _error("peakline serve")
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not 0 <= opts.port <= 65535:
        raise UsageError(f"--port {opts.port}: expected 0 to 65535")
    _need_extra()
    import uvicorn

    from peakline.server.app import create_app
    from peakline.server.database import open_engine, url_for

    url = url_for(opts.db, opts.data_dir)
    engine = open_engine(url)
    app = create_app(engine, max_upload_bytes=opts.max_upload, auth_reads=opts.auth_reads)
    family = socket.AF_INET6 if ":" in opts.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((opts.host, opts.port))
    except OSError as error:
        raise UsageError(f"cannot listen on {opts.host}:{opts.port}: {error.strerror}") from None
    sock.listen(2048)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"peakline serve: listening on http://{shown}:{port} (database "
          f"{engine.url.render_as_string(hide_password=True)})", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=10))
    server.run(sockets=[sock])
    engine.dispose()
    return 0


def token_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="peakline serve token",
        description="`create NAME`: make a write token, print it (only it) on standard output; "
                    "the server stores only its SHA-256.")
    parser.add_argument("action", choices=["create"])
    parser.add_argument("name")
    _database_options(parser)
    parser.error = _error("peakline serve token")
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    _need_extra()
    from peakline.server import store
    from peakline.server.database import open_engine, url_for

    engine = open_engine(url_for(opts.db, opts.data_dir), pool_size=1)
    try:
        print(store.create_token(engine, opts.name))
    finally:
        engine.dispose()
    return 0
