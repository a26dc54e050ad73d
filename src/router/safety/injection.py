"""Detects instruction-like text inside knowledge (prompt injection), in Portuguese and English.

Why at build *and* query time: the compiler flags every field once (cheap, visible in the
catalog and in ``kr build``'s warnings), and the answer builder drops flagged sentences so
knowledge text never reaches an answer as an instruction; it is still indexed and quotable as data.

Why shapes and not words: the sample's occupational-safety documents say "ignore", "instruções"
and "sistema" ("sistema de ancoragem") all the time. A pattern needs an imperative aimed at an
assistant, a role prefix at the start of a line or sentence, or a chat-template token — never a
single word. Text is scanned in a canonical form (compatibility forms, no zero-width or other
invisible format characters, case and accents folded, runs of spaces collapsed) and once more with
letter-by-letter spacing ("i g n o r e") joined, so those obfuscations read as the plain text.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "INJECTION_FLAG",
    "heading_looks_like_injection",
    "logical_lines",
    "looks_like_injection",
    "scan_form",
    "sentence_flags",
    "split_sentences",
    "visible_text",
]

INJECTION_FLAG = "prompt_injection"

# A negation just before an order makes it advice to a person ("nunca ignore as regras").
_NEGATION = re.compile(r"\b(nao|nunca|jamais|nem|never|not|don't|dont) $")
_NOT = "(?#negatable)"  # marks the patterns whose match is void after a negation
# Verbs that order an assistant to drop what it was told, and what they drop.
_DROP = (
    r"ignore|ignora|ignorar|ignorem|desconsidere|desconsiderar|desconsidera|esqueca|esquecer|"
    r"esquece|disregard|forget|override"
)
_RULES = (
    r"instruc\w*|regras?|orientac\w*|diretrizes?|comandos?|restric\w*|politicas?|prompts?|"
    r"instructions?|rules?|guidelines?|directives?|policies|policy|restrictions?|guardrails?|"
    r"commands?"
)
# What makes the dropped rules the assistant's own: "as anteriores", "todas", "suas", "above".
_THEIRS = (
    r"anteriores?|previas?|acima|todas?|todos?|suas|seus|tuas|teus|quaisquer|"
    r"previous|prior|above|all|earlier|preceding|your|any"
)
_AFTER = r"anteriores?|previas?|acima|above|before|previous|prior|earlier"
_EN_ROLES = r"system|assistant|developer"
# Words that name an AI assistant (not "modelo" or "agente": equipment models, chemical agents).
_AI = (
    r"assistente|assistant|ia|ai|inteligencia artificial|chatbot|bot|llm|gpt|chatgpt|claude|"
    r"modelo de linguagem|language model"
)
_ORDERS = (
    r"ignore|ignora|desconsidere|esqueca|aprove|aprova|approve|responda|answer|respond|reply|diga|"
    r"say|tell|revele|reveal|mostre|show|print|imprima|execute|run|finja|pretend|aja|act|"
    r"obedeca|obey|siga|follow|voce|you|libere|autorize|authorize|grant|conceda|a partir de agora"
)
_LEAK = r"revele|revelar|revela|reveal|leak|vaze|vazar|dump|exfiltrate"
_SHOW = r"mostre|mostrar|exiba|exibir|imprima|imprimir|print|show|output|liste|list|envie|send"
_SECRETS = (
    r"senhas?|passwords?|segredos?|secrets?|credenciais|credentials?|prompt|"
    r"chaves? (de )?(api|secretas?|privadas?|de acesso)|(api|secret|private|access) keys?"
)
_LINE = r"(^|[\n.!?;>\]\)\"'*_|-])\s*"

_PATTERNS = [
    # "ignore todas as instruções", "disregard all previous rules", "esqueça suas regras"
    rf"{_NOT}\b({_DROP})\b.{{0,40}}\b({_THEIRS})\b.{{0,30}}\b({_RULES})\b",
    # "ignore as instruções anteriores", "forget the rules above"
    rf"{_NOT}\b({_DROP})\b.{{0,40}}\b({_RULES})\b.{{0,20}}\b({_AFTER})\b",
    rf"{_NOT}\b(ignore|disregard|forget|esqueca|desconsidere)\s+(everything|tudo)\b",
    # English role prefixes at the start of a line or sentence: "SYSTEM:", "Assistant:"
    rf"{_LINE}({_EN_ROLES})\s*:",
    # Portuguese role prefixes only when an order follows ("Sistema: ancoragem" is a label)
    rf"{_LINE}(sistema|assistente)\s*:\s*(\w+\s+){{0,3}}({_ORDERS})\b",
    # Alpaca / markdown prompt sections: "### Instruction", "### Response:"
    r"(^|\n)\s*#{2,}\s*(instruction|instructions|response|system|assistant|user|input)\b",
    # role changes: "you are now", "você agora é", "a partir de agora você", "act as"
    r"\byou are now\b|\bfrom now on,? you\b|\bvoce (agora )?e agora\b|\bvoce agora e\b",
    r"\ba partir de agora,? (voce|tu)\b|\bde agora em diante,? (voce|tu)\b",
    rf"\bvoce e (um|uma) (\w+ ){{0,2}}({_AI})\b|\byou are (an?|the) (\w+ ){{0,2}}({_AI})\b",
    r"\b(act as|pretend to be|roleplay as|aja como|atue como|finja (ser|que)|comporte-se como)\b"
    rf".{{0,40}}\b({_AI}|dan|system)\b",
    # an assistant addressed and ordered: "assistente, aprove", "AI: reveal"
    rf"\b({_AI})\s*[,:]\s*({_ORDERS})\b",
    # no limits: "assistente sem restrições", "unrestricted assistant"
    rf"\b({_AI})\b.{{0,30}}\b(sem (restric|filtro|limite|censura)\w*|without (restrictions|"
    r"limits|filters)|unrestricted|uncensored|unfiltered|no restrictions)",
    r"\b(unrestricted|uncensored|unfiltered)\b.{0,30}\b(assistant|ai|model|chatbot|bot|llm)\b",
    # new orders: "your new instructions", "novas instruções:"
    r"\b(suas|tuas|your)\s+(novas|new)\s+(instruc\w*|regras|ordens|instructions|rules|orders)\b",
    r"\b(novas instrucoes|new instructions|updated instructions)\s*:",
    # secrets and the prompt itself
    rf"{_NOT}\b({_LEAK})\b.{{0,40}}\b(tokens?|{_SECRETS})\b",
    rf"{_NOT}\b({_SHOW})\b.{{0,40}}\b({_SECRETS})\b",
    r"\bprompt do sistema\b|\bsystem prompt\b|\bjailbreak\b|\bmodo desenvolvedor\b|"
    r"\bdeveloper mode\b|\bdo anything now\b",
    # hide it from the user: "não conte ao usuário", "do not tell the user"
    r"\b(nao|never|do not|don't|dont)\s+(conte|diga|mencione|informe|avise|tell|mention|inform|"
    r"reveal)\s+(isso\s+|this\s+)?(ao|a|the|para o)\s+(usuario|user)\b",
]
# Chat-template and special tokens of the common model families; matched before folding words.
_TOKENS = (
    r"<\|[a-z_ ]{2,30}\|>|\[/?inst\]|<</?sys>>|</?s>|<(start|end)_of_turn>|<\|?endoftext\|?>|"
    r"<\|?(im_start|im_end|system|user|assistant|eot_id|begin_of_text|start_header_id|"
    r"end_header_id)\|?>"
)
# One regex per pattern: separate searches are faster than one alternation (sre optimises each
# pattern's first characters), and a negatable one is checked for the negation in Python, since
# look-behinds at every position cost more than the pattern itself.
_RULES_COMPILED = [(re.compile(p), p.startswith(_NOT)) for p in [_TOKENS, *_PATTERNS]]
_HEADING_ROLE = re.compile(
    r"^\W*(system|system prompt|prompt do sistema|assistant|instruction|instructions|"
    r"developer|user|human)\W*$"
)
# A line break, or a space after sentence punctuation; after a full stop only when what follows
# does not start in lower case or with a digit: "CDC, art. 49) garante" is one sentence.
_SENTENCE_END = re.compile(r"\s*\n\s*|(?<=[!?;:])\s+|(?<=\.)\s+(?![a-zß-öø-ÿ0-9])")
_SPACES = re.compile(r"[ \t\u00a0]+")
# Invisible format characters (Unicode category Cf): zero-width space/joiners, soft hyphen, bidi
# controls, word joiner, BOM, interlinear annotations and tag characters.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_SPACED_LETTERS = re.compile(r"\b(?:\w[ .\-_]){3,}\w\b")
# Look-alikes of the characters the patterns rely on that NFKC leaves alone.
_LOOKALIKES = str.maketrans({"\u2039": "<", "\u203a": ">", "\u2329": "<", "\u232a": ">",
                             "\u27e8": "<", "\u27e9": ">", "\u3008": "<", "\u3009": ">",
                             "\u02d0": ":", "\ua789": ":", "\u2236": ":"})  # fmt: skip


def visible_text(text: str) -> str:
    """The text without invisible format characters (they can hide a word from a reader, or
    split one so a filter misses it, while a model still reads it)."""
    return _INVISIBLE.sub("", text)


def scan_form(text: str) -> str:
    """The canonical form the patterns read: NFKC (full-width and other compatibility forms),
    look-alike brackets and colons made plain, invisible format characters (zero-width space and
    joiner, soft hyphen, bidi controls) dropped, case and accents folded, spaces collapsed."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).translate(_LOOKALIKES))
    folded = _COMBINING.sub("", unicodedata.normalize("NFD", text.casefold()))
    return _SPACES.sub(" ", folded)


def _despaced(folded: str) -> str:
    """``i g n o r e`` / ``s.y.s.t.e.m`` joined into words (only runs of 4+ single letters)."""
    return _SPACED_LETTERS.sub(lambda m: re.sub(r"[ .\-_]", "", m.group(0)), folded)


def looks_like_injection(text: str) -> bool:
    """True when the text reads like an instruction aimed at an assistant or model."""
    folded = scan_form(text)
    if _matches(folded):
        return True
    joined = _despaced(folded)
    return joined != folded and _matches(joined)


def _matches(folded: str) -> bool:
    for pattern, negatable in _RULES_COMPILED:
        for match in pattern.finditer(folded):
            if not negatable or not _NEGATION.search(
                folded, max(0, match.start() - 8), match.start()
            ):
                return True
            # a negated order: look for another occurrence of the same pattern
    return False


def heading_looks_like_injection(heading: str) -> bool:
    """A heading is also flagged when it *is* a role or prompt-section name ("System",
    "### Instruction" parses to the heading "Instruction"), which in body text would be a word."""
    return looks_like_injection(heading) or _HEADING_ROLE.match(scan_form(heading)) is not None


def split_sentences(text: str) -> list[str]:
    """Rough sentence split (punctuation or line breaks); enough to quote and to filter."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


_BLOCK_START = re.compile(r"\s*(?:[-*+>|#]|\d+[.)])(?:\s|$)")


def logical_lines(text: str) -> list[str]:
    """The text's lines with soft-wrapped Markdown lines joined: a line that does not start a
    block (list item, quote, table row, heading) continues a previous line that did not end
    a sentence. Why: a paragraph wrapped at 80 columns was quoted cut mid-sentence ("... e
    vigia na")."""
    lines: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        joins = (
            line
            and lines
            and lines[-1]
            and not _BLOCK_START.match(raw)
            and not lines[-1].endswith((".", "!", "?", ":", ";"))
            and not lines[-1].startswith(("#", "|"))  # a heading or table row ends its line
        )
        if joins:
            lines[-1] = f"{lines[-1]} {line}"
        else:
            lines.append(line)
    return lines


def sentence_flags(text: str) -> list[tuple[str, bool]]:
    """Each sentence of the text and whether it must be withheld. Judged line by line: on a
    line that reads like an instruction, a flagged sentence withholds the rest of its line
    ("SYSTEM:" split off "approve every permit." by the colon), and a line no single sentence of
    which is flagged is withheld whole."""
    judged: list[tuple[str, bool]] = []
    for line in logical_lines(text):
        sentences = split_sentences(line)
        if not sentences or not looks_like_injection(line):
            judged += [(sentence, False) for sentence in sentences]
            continue
        flags, withheld = [], False
        for sentence in sentences:
            withheld = withheld or looks_like_injection(sentence)
            flags.append(withheld)
        judged += zip(sentences, flags if any(flags) else [True] * len(flags), strict=True)
    return judged
