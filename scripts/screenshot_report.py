"""Screenshot of a run's report.html with headless Chromium (for docs/report.png).

    python scripts/screenshot_report.py RUN_DIR OUT.png [--width 1280] [--height 1600 | --full-page]
        [--section ID [--open]]

--section starts the picture at one section of the report (its id: plots, slices, evaluation, ...); --open
unfolds that section's folded parts (each slice's pictures) first.

Builds the report first when the run directory has none. Needs the Debian packages
`chromium` and `chromium-driver`.
"""

from __future__ import annotations

import argparse
import os
import sys

# Run as a file: the WebDriver client is the tests' own (tests/report/browser.py, not part of dtfx), and the
# repository root that holds `tests` is one directory up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dtfx.pipeline.errors import UserError  # noqa: E402
from dtfx.pipeline.report import REPORT_FILE, build_report  # noqa: E402
from tests.report.browser import BrowserError, Chromium  # noqa: E402

# Scrolls section arguments[0] to the top (unfolding its <details> when arguments[1]); the ids of every section when
# there is no such section.
_SHOW_SECTION = """
const section = document.getElementById(arguments[0]);
if (!section) return [...document.querySelectorAll('section[id]')].map((s) => s.id);
if (arguments[1]) section.querySelectorAll('details').forEach((d) => { d.open = true; });
window.scrollTo(0, section.getBoundingClientRect().top + window.scrollY);
return null;
"""


def screenshot(run_dir: str, out_path: str, width: int = 1280, height: int = 1600, full_page: bool = False,
               section: str | None = None, unfold: bool = False) -> list[str]:
    """Writes a PNG of the report of `run_dir` to `out_path` (from `section` on, if given); returns the browser's
    console errors (none expected)."""
    report = os.path.join(run_dir, REPORT_FILE)
    if not os.path.isfile(report):
        report = build_report(run_dir)
    with Chromium(width=width, height=height) as browser:
        browser.open(report)
        if section is not None:
            sections = browser.script(_SHOW_SECTION, section, unfold)
            if sections is not None:
                raise UserError(f"--section {section}: the report has no such section; it has {', '.join(sections)}")
        png = browser.screenshot(full_page=full_page and section is None)
        errors = [m["message"] for m in browser.console_messages() if m.get("level") == "SEVERE"]
    with open(out_path, "wb") as handle:
        handle.write(png)
    return errors


def main(argv: list[str] | None = None) -> int:
    """Command line: RUN_DIR OUT.png; exit 2 for a bad run directory or a missing browser."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("out", metavar="OUT.png")
    parser.add_argument("--width", type=int, default=1280, help="window width in CSS pixels")
    parser.add_argument("--height", type=int, default=1600, help="window height (the picture's, without --full-page)")
    parser.add_argument("--full-page", action="store_true", help="the whole page, however long")
    parser.add_argument("--section", metavar="ID", help="start at this section of the report (plots, slices, ...)")
    parser.add_argument("--open", action="store_true", help="unfold the section's folded parts first")
    args = parser.parse_args(argv)
    try:
        errors = screenshot(args.run_dir, args.out, args.width, args.height, args.full_page, args.section, args.open)
    except (UserError, BrowserError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for message in errors:
        print(f"console error: {message}", file=sys.stderr)
    print(args.out)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
