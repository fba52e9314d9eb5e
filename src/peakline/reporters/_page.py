"""The frame of every self-contained HTML page peakline writes (the profile report, html.py;
the sweep report, sweep_html.py): templates/page_head.html holds what they share (doctype,
Content-Security-Policy, title, inline stylesheet), and each page's template starts with
its ``{{head}}`` slot.

Slots are ``{{name}}``; each template is scanned once, so text pasted into a slot (a file
name, embedded JSON) is never scanned again."""

from __future__ import annotations

import re
from importlib import resources

_SLOT = re.compile(r"\{\{(\w+)\}\}")


def template(name: str) -> str:
    """templates/NAME, shipped inside the package."""
    return resources.files("peakline.reporters").joinpath("templates", name) \
        .read_text(encoding="utf-8")


def fill(text: str, slots: dict[str, str]) -> str:
    """text with every ``{{name}}`` replaced by slots[name], in one pass."""
    return _SLOT.sub(lambda m: slots[m.group(1)], text)


def page(name: str, *, title: str, css: str, scripts: bool, slots: dict[str, str]) -> str:
    """The page templates/NAME, with the shared head (title: already HTML-escaped; scripts:
    whether the page's own inline scripts may run) and the page's other slots filled."""
    head = fill(template("page_head.html"), {
        "title": title,
        "css": css,
        "script_src": " script-src 'unsafe-inline';" if scripts else "",
    })
    return fill(template(name), {**slots, "head": head.removesuffix("\n")})
