"""The intake commands: `serve` (the intake API), `token create|list|revoke` (its tokens, as the
operator) and `replay` (post a file's complaints to the API at a steady rate)."""

from __future__ import annotations

import argparse
import os
import sys

from core.cli.common import CommandError, add_json_option, emit_json

TOKEN_ENV = "GRIEVANCE_LENS_TOKEN"


def _cmd_serve(args: argparse.Namespace) -> None:
    from core.intake.serve import ServeConfig, serve

    serve(ServeConfig(host=args.host, port=args.port, model=args.model, workers=args.workers))


def _cmd_token_create(args: argparse.Namespace) -> None:
    from core.access import OPERATOR
    from core.intake.tokens import create_token
    from core.review.store import Store, default_db_path

    scopes = args.scopes.split(",")
    with Store.open(default_db_path()) as store:
        made = create_token(store, args.name, scopes, actor=OPERATOR, source=args.source)
    if args.json:
        emit_json({**made.token.to_json(), "token": made.secret})
        return
    print(made.secret)
    print(
        f"token {made.token.name} ({', '.join(made.token.scopes)}; source {made.token.source}): "
        "shown this once, stored only as a hash; send it as `Authorization: Bearer ...`",
        file=sys.stderr,
    )


def _cmd_token_list(args: argparse.Namespace) -> None:
    from core.access import OPERATOR
    from core.intake.tokens import list_tokens
    from core.review.store import Store, default_db_path

    with Store.open(default_db_path()) as store:
        tokens = list_tokens(store, actor=OPERATOR)
    if args.json:
        emit_json({"tokens": [t.to_json() for t in tokens]})
        return
    for t in tokens:
        state = "active" if t.active else f"revoked {t.revoked_at[:16]}"
        print(f"{t.name:<24} {','.join(t.scopes):<12} source {t.source:<20} {state}")


def _cmd_token_revoke(args: argparse.Namespace) -> None:
    from core.access import OPERATOR
    from core.intake.tokens import revoke_token
    from core.review.store import Store, default_db_path

    with Store.open(default_db_path()) as store:
        token = revoke_token(store, args.name, actor=OPERATOR)
    if args.json:
        emit_json(token.to_json())
    else:
        print(f"token {token.name} revoked; its next request is refused (401)")


def _cmd_replay(args: argparse.Namespace) -> None:
    from core.intake.replay import ReplayConfig, replay, replay_texts

    token = args.token or os.environ.get(TOKEN_ENV, "")
    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be at least 1, got {args.limit}")
    texts = replay_texts(args.file, args.text_col)
    config = ReplayConfig(
        url=args.url, token=token, rate=args.rate, limit=args.limit, prefix=args.prefix
    )

    def shown(row: int, answer: dict) -> None:
        if not args.json:
            outcome = answer.get("error") or f"{answer['desk']} ({answer['confidence']:.2f})"
            print(f"row {row}: {outcome}", file=sys.stderr)

    report = replay(texts, config, on_answer=shown)
    if args.json:
        emit_json(report.to_json())
    else:
        print(
            f"posted {report.posted} complaints in {report.seconds:.1f} s "
            f"({report.duplicates} already stored, {report.refused} refused)"
        )


def register(sub: argparse._SubParsersAction) -> None:
    """Add `serve`, `token` and `replay`."""
    p = sub.add_parser("serve", help="start the intake API (default http://127.0.0.1:8600)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    p.add_argument("--port", type=int, default=8600)
    p.add_argument("--model", default="live", help="live (default: follows promotions) or a name")
    p.add_argument("--workers", type=int, default=1, help="API processes on the one store")
    p.set_defaults(handler=_cmd_serve)

    token = sub.add_parser("token", help="create, list or revoke the intake API's tokens")
    verbs = token.add_subparsers(dest="verb", required=True, parser_class=type(token))
    create = verbs.add_parser("create", help="create a token (its secret is shown once)")
    create.add_argument("name")
    create.add_argument("--scopes", required=True, help="submit, read or submit,read")
    create.add_argument("--source", help="the bank's system it speaks for (default: the name)")
    add_json_option(create, "print name, scopes, source and the token as JSON")
    create.set_defaults(handler=_cmd_token_create)
    listed = verbs.add_parser("list", help="every token, active and revoked (never a secret)")
    add_json_option(listed, "print the tokens as JSON")
    listed.set_defaults(handler=_cmd_token_list)
    revoke = verbs.add_parser("revoke", help="revoke a token at once")
    revoke.add_argument("name")
    add_json_option(revoke, "print the revoked token as JSON")
    revoke.set_defaults(handler=_cmd_token_revoke)

    p = sub.add_parser("replay", help="post a file's complaints to the intake API at a rate")
    p.add_argument("file", nargs="?", help="CSV, XLSX or Parquet (default: the demo data)")
    p.add_argument("--rate", type=float, default=2.0, help="complaints per second (default 2)")
    p.add_argument("--token", help=f"a submit token (default: ${TOKEN_ENV})")
    p.add_argument("--url", default="http://127.0.0.1:8600", help="the API (default local)")
    p.add_argument("--limit", type=int, help="post at most this many complaints")
    p.add_argument("--prefix", default="replay", help="ids are PREFIX-ROW (default replay)")
    p.add_argument("--text-col", help="column holding the complaint text (default: detected)")
    add_json_option(p, "print posted, duplicates, refused, seconds and desks as JSON")
    p.set_defaults(handler=_cmd_replay)
