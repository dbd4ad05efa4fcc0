"""Count what the regex engine would redact in a JSONL file of memories (or queries).

``python -m rushmem_tools.bench.pii_scan memories.jsonl [--field content] [--show]`` prints how
many texts it flags, by type; ``--show`` also prints each match with its text, for checking false
positives on data that holds no personal data (it prints the values: run it on test data only).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from rushmem.privacy.detectors import RegexDetector


def main(argv: list[str] | None = None) -> int:
    prog = "python -m rushmem_tools.bench.pii_scan"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="JSONL files, one object per line")
    parser.add_argument("--field", action="append", help="text field(s) to scan (default: content, query)")
    parser.add_argument("--show", action="store_true", help="print every match and its text")
    args = parser.parse_args(argv)
    fields = args.field or ["content", "query"]
    detector = RegexDetector()
    texts = flagged = chars = 0
    by_type: Counter[str] = Counter()
    started = time.perf_counter()
    for path in args.files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            for field in fields:
                text = row.get(field)
                if not isinstance(text, str):
                    continue
                texts += 1
                chars += len(text)
                findings = detector.detect(text)
                if findings:
                    flagged += 1
                by_type.update(f.type for f in findings)
                if args.show:
                    for f in findings:
                        print(f"{f.type}\t{text[f.start : f.end]!r}\t{text}")
    elapsed = time.perf_counter() - started
    per_text = elapsed / texts * 1000 if texts else 0.0
    print(f"{flagged} of {texts} texts flagged ({chars:,} characters, {per_text:.3f} ms a text)")
    for kind, count in by_type.most_common():
        print(f"  {kind}: {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
