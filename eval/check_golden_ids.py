#!/usr/bin/env python3
"""Consistency check for the sample knowledge base and the golden set.

Usage: python3 eval/check_golden_ids.py  (from the repo root, or anywhere)
Exits with status 1 if any error is found.
"""
import datetime as dt
import json
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "knowledge"
GOLDEN = ROOT / "eval" / "golden.jsonl"

ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$")
HEADING_RE = re.compile(r"^(#{1,4})\s+(.*?)\s*$")
SECTION_ID_RE = re.compile(r"\{#([^}]+)\}\s*$")
WIKILINK_RE = re.compile(r"\[\[([^\]|]+)(?:\|[^\]]*)?\]\]")

errors, warnings = [], []


def err(msg):
    errors.append(msg)


def warn(msg):
    warnings.append(msg)


def to_date(v):
    if v is None:
        return None
    if isinstance(v, dt.date):
        return v
    return dt.date.fromisoformat(str(v))


docs = []  # dicts: path, meta, body
for p in sorted(KB.rglob("*.md")):
    if p.name.startswith("_"):
        continue
    text = p.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        err(f"{p}: no front matter")
        continue
    end = text.find("\n---\n", 4)
    meta = yaml.safe_load(text[4:end])
    body = text[end + 5:]
    docs.append({"path": p, "meta": meta, "body": body})

doc_ids = defaultdict(list)  # lower id -> docs
section_ids = {}  # lower id -> (doc id, path)
links = []
facts = {}  # "doc.fact" lower -> value
for d in docs:
    m, p = d["meta"], d["path"]
    sid = m.get("semanticId")
    if not sid or not ID_RE.match(str(sid)):
        err(f"{p}: missing/malformed semanticId {sid!r}")
        continue
    if not m.get("title"):
        err(f"{p}: missing title")
    for k in ("description", "keywords"):
        if not m.get(k):
            err(f"{p}: missing {k}")
    if not isinstance(m.get("keywords"), list):
        err(f"{p}: keywords is not a list")
    d["id"] = sid
    d["tenant"] = m.get("tenant", "*")
    doc_ids[sid.lower()].append(d)
    words = len(re.findall(r"\w+", d["body"]))
    d["words"] = words
    if not 120 <= words <= 500:
        err(f"{p}: body has {words} words (want 120-500)")
    for name, val in (m.get("facts") or {}).items():
        if isinstance(val, (dict, list)):
            err(f"{p}: fact {name} is not scalar")
        facts[f"{sid}.{name}".lower()] = val
    in_code = False
    for ln, line in enumerate(d["body"].splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        h = HEADING_RE.match(line)
        if h:
            s = SECTION_ID_RE.search(h.group(2))
            if s:
                sec = s.group(1)
                if not ID_RE.match(sec):
                    err(f"{p}: malformed section id {sec}")
                if sec.lower() in section_ids and section_ids[sec.lower()][1] != p:
                    err(f"{p}: duplicate section id {sec} (also in {section_ids[sec.lower()][1]})")
                elif sec.lower() in section_ids:
                    err(f"{p}: duplicate section id {sec} in same file")
                section_ids[sec.lower()] = (sid, p)
                if not sec.lower().startswith(sid.lower() + "."):
                    warn(f"{p}: section id {sec} does not start with {sid}.")
        for t in WIKILINK_RE.findall(line):
            links.append((p, sid, t.strip()))

# duplicate document ids: only successive versions with disjoint windows
for lid, ds in doc_ids.items():
    by_tenant = defaultdict(list)
    for d in ds:
        by_tenant[d["tenant"]].append(d)
    for tenant, group in by_tenant.items():
        if len(group) < 2:
            continue
        wins = []
        for d in group:
            f, u = to_date(d["meta"].get("validFrom")), to_date(d["meta"].get("validUntil"))
            if f is None:
                err(f"{d['path']}: versioned doc without validFrom")
                f = dt.date.min
            wins.append((f, u or dt.date.max, d))
        wins.sort(key=lambda w: w[0])
        for a, b in zip(wins, wins[1:]):
            if b[0] <= a[1]:
                err(f"overlapping versions of {lid}: {a[2]['path']} / {b[2]['path']}")
        vers = [d["meta"].get("version") for d in group]
        if len(set(map(str, vers))) != len(vers):
            err(f"versions of {lid} share a version number: {vers}")

for lid in doc_ids:
    if lid in section_ids:
        err(f"id {lid} is both a document and a section id")

all_ids = set(doc_ids) | set(section_ids)
for p, src, t in links:
    if t.lower() not in all_ids:
        err(f"{p}: wikilink target [[{t}]] does not exist")

# parents
missing_parent = []
for lid, ds in doc_ids.items():
    if "." in lid:
        parent = lid.rsplit(".", 1)[0]
        if parent not in doc_ids:
            missing_parent.append(ds[0]["id"])


def owner_doc(i):
    """documents (list) that own id i (a doc id or a section id)."""
    li = i.lower()
    if li in doc_ids:
        return doc_ids[li]
    if li in section_ids:
        return doc_ids[section_ids[li][0].lower()]
    return []


def is_deprecated(d):
    return d["meta"].get("status") == "deprecated" or d["meta"].get("trust") == "deprecated"


def valid_on(d, day):
    f, u = to_date(d["meta"].get("validFrom")), to_date(d["meta"].get("validUntil"))
    return (f is None or f <= day) and (u is None or day <= u)


# ---------------------------------------------------------------- golden
STOP = set("""a o as os um uma uns umas de do da dos das em no na nos nas por pelo pela pelos pelas
para pra com sem sob sobre entre ate até e ou mas que se como qual quais quando onde quem cujo
eu tu ele ela nos nós vos eles elas me te lhe meu minha meus minhas seu sua seus suas nosso nossa
este esta estes estas esse essa esses essas isso isto aquilo aquele aquela ao aos à às é ser são
foi era está estão estar tem têm ter há já não sim mais menos muito muita pouco tudo todo toda todos
todas cada outro outra outros outras mesmo mesma também só so ainda lá aqui ali então depois antes
faz fazer faço devo deve devem posso pode podem preciso precisa qualquer algum alguma alguns algumas
vou vai vamos sei sabe tá la lo las los num numa dum duma the of""".split())


def fold(s):
    s = unicodedata.normalize("NFD", s.lower())
    return "".join(c for c in s if unicodedata.category(c) != "Mn")


STOP = {fold(w) for w in STOP}


def content_words(s):
    return {w for w in re.findall(r"[a-z0-9]+", fold(s)) if w not in STOP and len(w) > 1}


KEYS = ["id", "query", "category", "expected", "forbidden", "tenant", "page", "tab", "focus",
        "date", "abstain", "intent", "expected_version", "fact"]
MIN = {"exact_id": 8, "acronym": 8, "system_term": 8, "paraphrase": 12, "typo": 8, "context": 8,
       "tenant": 8, "temporal": 6, "fact": 8, "out_of_scope": 10, "agentic": 8, "injection": 2}
TODAY = dt.date.today()
cats = Counter()
qids = set()
if GOLDEN.exists():
    for n, line in enumerate(GOLDEN.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            err(f"golden line {n}: bad JSON: {e}")
            continue
        tag = f"golden {q.get('id', n)}"
        if list(q.keys()) != KEYS:
            err(f"{tag}: keys {list(q.keys())} != {KEYS}")
        if q["id"] in qids:
            err(f"{tag}: duplicate id")
        qids.add(q["id"])
        c = q["category"]
        if c not in MIN:
            err(f"{tag}: unknown category {c}")
        cats[c] += 1
        if q["intent"] not in ("knowledge", "agentic"):
            err(f"{tag}: bad intent")
        if q["abstain"] and q["expected"]:
            err(f"{tag}: abstain with expected ids")
        if not q["abstain"] and not q["expected"]:
            err(f"{tag}: no expected ids and not abstain")
        if c == "out_of_scope" and not q["abstain"]:
            err(f"{tag}: out_of_scope must abstain")
        if c == "agentic" and q["intent"] != "agentic":
            err(f"{tag}: agentic category needs intent agentic")
        day = to_date(q["date"]) if q["date"] else TODAY
        for i in q["expected"] + q["forbidden"] + ([q["focus"]] if q["focus"] else []):
            if i.lower() not in all_ids:
                err(f"{tag}: id {i} does not exist")
        for i in q["expected"]:
            for d in owner_doc(i):
                if d["tenant"] not in ("*", q["tenant"]):
                    err(f"{tag}: expected {i} belongs to tenant {d['tenant']} but query tenant is {q['tenant']}")
                if is_deprecated(d):
                    err(f"{tag}: expected {i} is deprecated")
            if owner_doc(i) and not any(valid_on(d, day) for d in owner_doc(i)):
                err(f"{tag}: expected {i} not valid on {day}")
        for i in q["forbidden"]:
            if i in q["expected"]:
                err(f"{tag}: {i} both expected and forbidden")
        if set(q["expected"]) & set(q["forbidden"]):
            pass
        if q["fact"]:
            if q["fact"].lower() not in facts:
                err(f"{tag}: fact {q['fact']} does not exist")
            else:
                fdoc = q["fact"].rsplit(".", 1)[0]
                if fdoc not in q["expected"]:
                    warn(f"{tag}: fact doc {fdoc} not in expected")
        if c == "fact" and not q["fact"]:
            err(f"{tag}: fact category without fact")
        if q["expected_version"] is not None:
            ok = False
            for i in q["expected"]:
                for d in owner_doc(i):
                    if valid_on(d, day) and str(d["meta"].get("version")) == str(q["expected_version"]):
                        ok = True
            if not ok:
                err(f"{tag}: expected_version {q['expected_version']} is not the version valid on {day}")
        if c == "paraphrase":
            qw = content_words(q["query"])
            for i in q["expected"]:
                for d in owner_doc(i):
                    m = d["meta"]
                    dw = content_words(" ".join([str(m.get("title", "")), " ".join(map(str, m.get("keywords") or [])),
                                                 " ".join(map(str, m.get("aliases") or [])), d["id"].replace(".", " "),
                                                 d["body"]]))
                    common = qw & dw
                    if common:
                        err(f"{tag}: paraphrase shares words {sorted(common)} with {d['id']}")
                    stems = {w[:5] for w in qw if len(w) >= 5} & {w[:5] for w in dw if len(w) >= 5}
                    if stems:
                        warn(f"{tag}: paraphrase shares 5-char stems {sorted(stems)} with {d['id']}")
    for c, mn in MIN.items():
        if cats[c] < mn:
            err(f"golden: category {c} has {cats[c]} < {mn}")
    if sum(cats.values()) < 90:
        err(f"golden: only {sum(cats.values())} queries")
else:
    warn("golden.jsonl not found")

print(f"documents: {len(docs)} (distinct ids {len(doc_ids)}), sections with ids: {len(section_ids)}, "
      f"facts: {len(facts)}, wikilinks: {len(links)}")
print("docs without parent doc:", ", ".join(sorted(missing_parent)) or "-")
print("golden per category:", dict(cats), "total", sum(cats.values()))
for w in warnings:
    print("WARN ", w)
for e in errors:
    print("ERROR", e)
print("OK" if not errors else f"{len(errors)} error(s)")
sys.exit(1 if errors else 0)
