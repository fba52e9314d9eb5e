"""The verdict for CI systems: JUnit XML (one test case per budget) and a Markdown summary
(e.g. for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment)."""

from __future__ import annotations

import json
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

from peakline.gates.verdict import Verdict, describe_line, show


def render_json(verdict: Verdict, stream: TextIO) -> None:
    json.dump(verdict.to_dict(), stream, indent=1, allow_nan=False)
    stream.write("\n")


def render_junit(verdict: Verdict, stream: TextIO) -> None:
    suite = f"peakline check {verdict.program}"
    failures = len(verdict.failed)
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(f"<testsuites name={quoteattr('peakline')} tests=\"{len(verdict.results)}\" "
                 f"failures=\"{failures}\" errors=\"0\">\n")
    stream.write(f"  <testsuite name={quoteattr(suite)} tests=\"{len(verdict.results)}\" "
                 f"failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n")
    for r in verdict.results:
        name = quoteattr(r.name)
        classname = quoteattr(f"peakline.budgets.{verdict.program}")
        stream.write(f"    <testcase name={name} classname={classname}>\n")
        text = f"{r.name}: measured {show(r.name, r.measured)}, allowed {show(r.name, r.limit)}"
        if not r.ok:
            body = "\n".join([text, *(describe_line(r.name, e) for e in r.lines)])
            stream.write(f"      <failure message={quoteattr(text)} type=\"over-budget\">"
                         f"{escape(body)}</failure>\n")
        else:
            stream.write(f"      <system-out>{escape(text)}</system-out>\n")
        stream.write("    </testcase>\n")
    stream.write("  </testsuite>\n</testsuites>\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(verdict: Verdict, stream: TextIO) -> None:
    head = "passed" if verdict.ok else "**over budget**"
    stream.write(f"### peakline check: `{_cell(verdict.program)}` {head}\n\n")
    stream.write("| budget | measured | allowed | |\n|---|---:|---:|---|\n")
    for r in verdict.results:
        stream.write(f"| `{r.name}` | {show(r.name, r.measured)} | {show(r.name, r.limit)} | "
                     f"{'ok' if r.ok else '**FAIL**'} |\n")
    for r in verdict.failed:
        stream.write(f"\n**{r.name}**: {show(r.name, r.measured)} > {show(r.name, r.limit)}"
                     + (f" ({_cell(r.note)})" if r.note else "") + "\n\n")
        for e in r.lines:
            stream.write(f"- `{_cell(describe_line(r.name, e))}`\n")
    stream.write("\n")
