"""The class report of the planted batch opened from disk (``file://``) in headless Chromium:
every figure decodes, the sections show, nothing is fetched; a screenshot is kept in
tests/output/class-report.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_report_page_in_chromium(batch: dict, chromium_page: Any, output_dir: Path) -> None:
    page = batch["out"] / "report.html"
    requests: list[str] = []
    chromium_page.on("request", lambda request: requests.append(request.url))
    chromium_page.goto(page.as_uri())
    chromium_page.wait_for_load_state("load")
    chromium_page.screenshot(path=str(output_dir / "class-report.png"), full_page=True)
    headings = chromium_page.locator("h2").all_inner_texts()
    assert headings == ["To review by hand first", "Not in the latest batch, kept", "10.1-self-attention",
                        "Grading time"]
    images = chromium_page.locator("img")
    assert images.count() == 3
    widths = images.evaluate_all("images => images.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 300 for w in widths), widths
    assert chromium_page.get_by_role("cell", name="K computed with W_q", exact=True).is_visible()
    assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
