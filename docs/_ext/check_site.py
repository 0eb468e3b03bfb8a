"""Serve a built HTML site on localhost and check it as a browser would follow it.

Every ``.html`` page of the site (the theme's ``_static`` fragments apart) is fetched over HTTP
and must answer 200; every internal link (``href`` and ``src`` of any element) must answer 200
too, and a link with a fragment (``page.html#anchor``) must find an element with that ``id`` (or
an ``<a name>``) on its page.
Links to other hosts are not followed (the site must not need them: a reader may be offline).

Usage::

    python docs/_ext/check_site.py docs/_build/html

Exit status 0 when the site is whole, 1 with one line per broken link otherwise.
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("href", "src"):
                self.links.append(value)
            elif key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)


@dataclass
class SiteReport:
    """What :func:`check_site` found."""

    pages: int = 0
    links: int = 0
    broken: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every page and internal link answered and every anchor exists."""
        return not self.broken


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def check_site(root: str | Path) -> SiteReport:
    """Serve ``root`` on an ephemeral localhost port and check every page and internal link."""
    root = Path(root).resolve()
    if not (root / "index.html").is_file():
        raise FileNotFoundError(f"{root} has no index.html: build the site first")
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    report = SiteReport()
    pages: dict[str, _Links] = {}
    try:
        for path in sorted(root.rglob("*.html")):
            if path.relative_to(root).parts[0] == "_static":
                continue  # the theme's template fragments, not pages
            url = base + path.relative_to(root).as_posix()
            status, body = _fetch(url)
            report.pages += 1
            if status != 200:
                report.broken.append(f"{url[len(base) :]}: page answered {status}")
                continue
            parser = _Links()
            parser.feed(body.decode("utf-8", errors="replace"))
            pages[url] = parser
        fetched: dict[str, int] = {}
        for page, parser in pages.items():
            for link in parser.links:
                target = urljoin(page, link)
                if not target.startswith(base):
                    continue  # another host, mailto:, javascript:, data:
                report.links += 1
                address, fragment = urldefrag(target)
                path = unquote(urlsplit(address).path)
                if path.endswith("/"):
                    address += "index.html"
                if address not in fetched:
                    fetched[address] = 200 if address in pages else _fetch(address)[0]
                where = page[len(base) :]
                if fetched[address] != 200:
                    report.broken.append(f"{where}: {link} answered {fetched[address]}")
                elif fragment and address in pages and unquote(fragment) not in pages[address].ids:
                    report.broken.append(f"{where}: {link} has no anchor #{fragment} on its page")
    finally:
        server.shutdown()
        server.server_close()
    return report


def main(argv: list[str] | None = None) -> int:
    """Check the site given on the command line; print what is broken."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python docs/_ext/check_site.py SITE_DIR", file=sys.stderr)
        return 2
    report = check_site(args[0])
    for line in report.broken:
        print(line)
    print(f"{report.pages} pages, {report.links} internal links: {len(report.broken)} broken")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
