"""The single-complaint commands: `explain` (why both models routed it, word by word) and
`probe` (reorder its words and compare both models)."""

from __future__ import annotations

import argparse
import sys

from core.cli.common import (
    add_json_option,
    add_model_option,
    add_runtime_options,
    emit_json,
    load_model_from_args,
)


def _complaint(text: str) -> str:
    """The TEXT argument, or standard input when it is "-"."""
    return sys.stdin.read() if text == "-" else text


def _cmd_explain(args: argparse.Namespace) -> None:
    from core.analysis.explain import ExplainConfig
    from core.analysis.lstm_explain import explain_any, explanation_method

    options = {"n_steps": args.steps, "max_steps": args.max_steps}
    options = {name: value for name, value in options.items() if value is not None}
    if args.max_delta is not None:
        options["max_relative_delta"] = args.max_delta or None  # 0: one pass
    config = ExplainConfig(target=args.target, **options)  # bad options fail first
    model = load_model_from_args(args.model, args)
    text = _complaint(args.text)
    expl = explain_any(model.neural, model.bow, text, config, decider=model.scorer)
    frozen = model.frozen_prediction(text)  # where the blend reads it (core.models.blend)
    decision = model.blend.decide(expl.neural, expl.bow, frozen)
    if args.json:
        emit_json(
            {
                **expl.to_json(),
                "method": explanation_method(model.neural),  # an LSTM: gradient x input
                "decision": {
                    **decision.to_json(),
                    "decided_by": model.blend.decided_by,
                    "shares": model.blend.shares,
                    "carried_by": list(model.blend.carrying),
                },
                "frozen_encoder": None if frozen is None else frozen.to_json(),
                "runtime": model.neural.runtime.to_json(),  # of the attributions
                "routing": model.routing,  # of the decision (core.models.serving)
            }
        )
        return
    print(f"decision: {decision.label} ({model.blend.describe()})")
    beside = "" if frozen is None else f"   frozen encoder: {frozen.label}"
    print(f"transformer: {expl.neural.label}   bag of words: {expl.bow.label}{beside}")
    relative = "n/a" if expl.relative_delta is None else f"{expl.relative_delta:.1%}"
    print(f"scores for {expl.target} (convergence delta {expl.delta:+.4f}, {relative} of gap)")
    print(f"  {'word':<20} {'transformer':>12} {'bag of words':>13}")
    for word, t, b in zip(expl.words, expl.neural_scores, expl.bow_scores, strict=True):
        print(f"  {word.text[:20]:<20} {t:>+12.4f} {b:>+13.4f}")


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why both models routed one complaint, word by word")
    add_model_option(p)
    p.add_argument("text", help='the complaint text ("-" reads it from standard input)')
    p.add_argument("--target", help="desk to explain (default: the transformer's prediction)")
    # Defaults live in core.analysis.explain.ExplainConfig (not imported here: it brings torch).
    p.add_argument("--steps", type=int, help="integration steps per path segment (default 4)")
    p.add_argument("--max-steps", type=int, help="integration steps at most (default 64)")
    p.add_argument(
        "--max-delta", type=float,
        help="add steps until |delta| <= this share of the logit gap (default 0.02; 0: one pass)",
    )  # fmt: skip
    add_runtime_options(p)
    add_json_option(p, "print the explanation as JSON")
    p.set_defaults(handler=_cmd_explain)


def _cmd_probe(args: argparse.Namespace) -> None:
    from core.analysis.perturbations import ProbeConfig
    from core.analysis.probe_compare import run_probes

    config = ProbeConfig(
        n_shuffles=args.shuffles, invariance=not args.no_invariance, seed=args.seed
    )
    model = load_model_from_args(args.model, args)
    result = run_probes(model.neural, model.bow, _complaint(args.text), config)
    if args.json:
        emit_json(result.to_json())
        return
    print(f"original: transformer {result.neural.label}, bag of words {result.bow.label}")
    for o in result.outcomes:
        bag = "same bag" if o.perturbation.bag_unchanged else "new bag "
        flips = "".join(
            f" [{name} flips]"
            for name, flipped in (("transformer", o.neural_flipped), ("bow", o.bow_flipped))
            if flipped
        )
        print(f"  {o.perturbation.kind:<15} {bag} {o.neural.label} / {o.bow.label}{flips}")
        print(f"      {' '.join(o.perturbation.text.split())[:100]}")


def _add_probe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="reorder one complaint's words and compare both models")
    add_model_option(p)
    p.add_argument("text", help='the complaint text ("-" reads it from standard input)')
    p.add_argument("--shuffles", type=int, default=2, help="random word orders (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffles and the typo")
    p.add_argument("--no-invariance", action="store_true", help="skip typo, please, punctuation")
    add_runtime_options(p)
    add_json_option(p, "print the probes as JSON")
    p.set_defaults(handler=_cmd_probe)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `explain` and `probe`."""
    _add_explain(sub)
    _add_probe(sub)
