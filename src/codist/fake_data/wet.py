"""Fake Common Crawl text: WET shards as Common Crawl publishes them, `*.warc.wet.gz` under a
`crawl-data/<crawl>/segments/<segment>/wet/` path: WARC/1.0 records, each its own gzip member
(so a reader may seek record by record), a `warcinfo` record first, then one `conversion` record
per page whose payload is the page's text, one paragraph a line. Headers as Common Crawl's
(WARC-Target-URI, WARC-Date, WARC-Record-ID, WARC-Refers-To, WARC-Block-Digest: the payload's
SHA-1 in base 32, Content-Type, Content-Length), lines ended by CRLF, each record followed by two
CRLFs. Written here: no WARC library is installed (warcio would write the same framing).

Sizes: the full-scale LM trains a SentencePiece unigram model of 24,006 pieces on the shards
(Anil), and SentencePiece refuses a vocabulary larger than the text supports: WORDS made-up
words drawn from VOCABULARY distinct ones (Zipf exponent ZIPF), 1.7 MB of text, support at most
32,642 pieces (measured with lm_data.SPM_SETTINGS; 180,000 of 70,000 supported only 23,719), and
tokenize to far more than the LM needs: its 32,768 held-out validation tokens plus, per update of
a rehearsal model group of 2 ranks x 128 rows x 33 tokens, 8,448 (x 2 for disjoint halves).
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import uuid
from pathlib import Path

import numpy as np

from .seeded import pseudo_words, rng

SHARDS = 2
VOCABULARY = 80000
WORDS = 220000
ZIPF = 0.5
PARAGRAPH_WORDS = (20, 120)
PAGE_PARAGRAPHS = (2, 8)
CRAWL = "CC-MAIN-2016-40"
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiouy"]
DATE = "2016-09-24T17:37:39Z"


def _record(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One WARC record, gzipped as its own member (mtime 0: the same content, the same bytes)."""
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    head += f"Content-Length: {len(payload)}\r\n\r\n"
    return gzip.compress(head.encode() + payload + b"\r\n\r\n", mtime=0)


def _id(r: np.random.Generator) -> str:
    return f"<urn:uuid:{uuid.UUID(bytes=r.bytes(16), version=4)}>"


def _paragraphs(r: np.random.Generator) -> list[str]:
    words = pseudo_words(r, VOCABULARY, SYLLABLES)
    p = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF
    drawn = r.choice(VOCABULARY, size=WORDS, p=p / p.sum())
    out, i = [], 0
    while i < WORDS:
        n = int(r.integers(*PARAGRAPH_WORDS))
        text = " ".join(words[j] for j in drawn[i:i + n])
        out.append(text[:1].upper() + text[1:] + ".")
        i += n
    return out


def write_wet(dest: Path, seed: int, root: Path) -> str:
    r = rng(seed, "common_crawl_wet")
    paragraphs = _paragraphs(r)
    folder = dest / "crawl-data" / CRAWL / "segments" / "1474738659496.36" / "wet"
    folder.mkdir(parents=True)
    per_shard = -(-len(paragraphs) // SHARDS)
    pages = 0
    for s in range(SHARDS):
        name = f"{CRAWL.replace('-2016-40', '-20160924173739')}-{s:05d}-fake.warc.wet.gz"
        info = (f"Software-Info: codist data fake\r\nExtracted-Date: Sat, 24 Sep 2016 17:37:39 GMT\r\n"
                f"isPartOf: {CRAWL}\r\noperator: none\r\ndescription: fake WET shard, random text\r\n").encode()
        chunks = [_record([("WARC-Type", "warcinfo"), ("WARC-Date", DATE), ("WARC-Filename", name),
                           ("WARC-Record-ID", _id(r)), ("Content-Type", "application/warc-fields")], info)]
        mine = paragraphs[s * per_shard:(s + 1) * per_shard]
        i = 0
        while i < len(mine):
            n = int(r.integers(*PAGE_PARAGRAPHS))
            payload = "\n".join(mine[i:i + n]).encode()
            digest = base64.b32encode(hashlib.sha1(payload).digest()).decode()
            chunks.append(_record([("WARC-Type", "conversion"), ("WARC-Target-URI", f"http://example.com/{s}/{pages}"),
                                   ("WARC-Date", DATE), ("WARC-Record-ID", _id(r)), ("WARC-Refers-To", _id(r)),
                                   ("WARC-Block-Digest", f"sha1:{digest}"), ("Content-Type", "text/plain")], payload))
            i += n
            pages += 1
        (folder / name).write_bytes(b"".join(chunks))
    return (f"{SHARDS} WET shards, {pages:,} conversion records, {len(paragraphs):,} paragraphs, {WORDS:,} words "
            f"of {VOCABULARY:,}")
