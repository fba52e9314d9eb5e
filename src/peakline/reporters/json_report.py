"""JSON report: the profile file itself (format v1, docs/profile-format.md) on a stream.

Same bytes as ``write_profile`` writes, so ``peakline view --json`` output can be read back
with ``read_profile`` and gated in CI with jq.
"""

from __future__ import annotations

from typing import TextIO

from peakline.model.profile import Profile
from peakline.model.profile_file import dumps_profile


def render(profile: Profile, stream: TextIO) -> None:
    """Write ``profile`` as profile-format JSON (one line plus newline) to ``stream``."""
    stream.write(dumps_profile(profile))
