"""Serialisation: build nested records, json.dumps them, json.loads them back.

Mixes interpreter time (building records) with native time (the json C accelerator).
Usage: python json_roundtrip.py [SCALE]   (SCALE=1.0 is about 2-4 s on the reference machine)
"""

import json
import sys


def make_record(i):
    return {
        "id": i,
        "name": f"user-{i}",
        "active": i % 3 == 0,
        "score": i * 0.125,
        "tags": ["alpha", "beta", str(i % 17)],
        "address": {"city": "Springfield", "zip": f"{i % 99999:05d}"},
    }


def main(scale):
    batches = max(1, int(80 * scale))
    total = 0
    for batch in range(batches):
        records = [make_record(batch * 10_000 + i) for i in range(10_000)]
        text = json.dumps(records)
        decoded = json.loads(text)
        total += sum(record["id"] % 7 for record in decoded)
    print(f"json_roundtrip: {batches} batches, checksum {total}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
