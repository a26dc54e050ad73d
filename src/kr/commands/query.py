"""``kr query``: ask the active knowledge version through the local service, print the answer."""

from __future__ import annotations

import argparse
import json

from kr.commands.options import reranker
from kr.local import local_service
from router.contract import QueryRequest, QueryResponse

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    request = QueryRequest(
        query=args.text,
        tenant=args.tenant,
        page=args.page,
        tab=args.tab,
        focus=args.focus,
        date=args.date,
        top_k=args.top_k,
    )
    response = await local_service(args.state, reranker=reranker(args)).query(request)
    if args.json:
        print(response.model_dump_json(indent=2))
    else:
        _print_answer(response, trace=args.trace)
    return 0


def _print_answer(response: QueryResponse, *, trace: bool) -> None:
    print(response.answer)
    print(
        f"\nconfidence {response.confidence_level} ({response.confidence:.2f}) · "
        f"intent {response.analysis.intent} · {response.knowledge_version}"
    )
    for rank, result in enumerate(response.results, start=1):
        print(f"{rank:>2}. {result.section_id}  {result.final_score:.3f}  {result.title}")
    if trace:
        print(json.dumps(response.trace, ensure_ascii=False, indent=1))
