"""The planted-injection corpus (``injection_corpus.jsonl``) and the document each case is
planted in, shared by ``test_injection_corpus.py`` and ``bench/injection_precision.py``.

Each line is one injection written for the test (issue 31, finding 3): ``id``, ``lang`` (pt or
en), ``form`` (homoglyph, zero-width, paraphrase, markup, delimiter, chat token, exfiltration…),
``field`` (where it is planted) and ``text``. :func:`planted_document` writes a small, clean
help-center document with the text in that field, so a case is caught only if the build's own
scan (``parse_knowledge_file``) reports it in that field.

``injection_heldout.jsonl`` has the same layout (``form`` is ``held-out``): 40 injections written
against the first detector to get past it. It caught 12 of 40; patterns were then added for the
families they showed (an AI greeted, "ignore the above", "this overrides", a changed task) and
it catches 33 (2026-12-05). The 7 misses are the limits docs/security.md names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPUS_FILE = Path(__file__).with_name("injection_corpus.jsonl")
# A second round, written against the first detector to get past it (it caught 12 of 40); the
# families it showed were then added, so it is no longer unseen: a regression floor.
HELD_OUT_FILE = Path(__file__).with_name("injection_heldout.jsonl")

# field of the corpus → the field a build warning names
REPORTED_FIELD = {
    "title": "title",
    "description": "description",
    "keywords": "keywords",
    "aliases": "aliases",
    "questions": "questions:2",
    "fact": "fact:planted",
    "heading": "heading",
    "body": "body",
    "alt": "body",
    "link": "body",
    "wikilink": "link",
    "comment": "comment",
}


def load_corpus(path: Path = CORPUS_FILE) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def planted_document(case: dict[str, Any] | None = None) -> str:
    """A clean help-center document with ``case["text"]`` in ``case["field"]`` (none: clean)."""
    field = case["field"] if case else ""
    text = case["text"] if case else ""
    title = text if field == "title" else "Prazo de postagem"
    front = [
        "semanticId: envio.prazo",
        f"title: {_quoted(title)}",
        f"description: {_quoted(text if field == 'description' else 'Quando postar um pedido.')}",
        f"keywords: [postagem, {_quoted(text if field == 'keywords' else 'envio')}]",
        f"aliases: [{_quoted(text if field == 'aliases' else 'prazo de envio')}]",
        "questions:",
        "  - Qual o prazo para postar o pedido?",
        f"  - {_quoted(text if field == 'questions' else 'Até quando devo postar?')}",
        "facts:",
        "  prazoDias: 2",
    ]
    if field == "fact":
        front.append(f"  planted: {_quoted(text)}")
    if field == "fact_name":
        front.append(f"  {text}: 3")
    body = {
        "body": text,
        "alt": f"![{text}](etiqueta.png)",
        "link": f"Veja [{text}](https://ajuda.example.com/envio).",
        "wikilink": f"Veja [[envio.prazo|{text}]].",
        "comment": f"<!-- {text} -->",
    }.get(field, "Leve o pacote à agência e guarde o comprovante.")
    heading = text if field == "heading" else "Como postar"
    return (
        "---\n" + "\n".join(front) + "\n---\n"
        "# Prazo de postagem\n\n"
        "O vendedor tem dois dias úteis para postar o pedido.\n\n"
        f"## {heading}\n\n"
        "Imprima a etiqueta no app.\n"
        f"{body}\n"
    )


def reported_field(case: dict[str, Any]) -> str:
    """The field a build warning must name for the case to count as caught."""
    if case["field"] == "fact_name":
        return f"fact:{case['text']}"
    return REPORTED_FIELD[case["field"]]
