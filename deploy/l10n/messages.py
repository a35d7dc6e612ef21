"""The reports' gettext catalogues: extraction, the catalogue check, compilation.

    python deploy/l10n/messages.py extract [--output PATH]   # the .pot (default .build/locale)
    python deploy/l10n/messages.py check [--locale-dir DIR]  # fails on a missing message
    python deploy/l10n/messages.py compile [--check] [--locale-dir DIR]

Extraction is pybabel's (deploy/l10n/babel.cfg, KEYWORDS: the calls whose first argument is a
literal message key) plus observer/reports/locale/unextracted-keys.txt, the keys the code builds
(f"crit.{criterion}") or names outside such a call. The check fails when a key of the .pot is
missing from a language's .po, untranslated or fuzzy, when a .po holds a key the code never
uses, or when a translation's {placeholders} differ from the English ones. The compiled .mo
files are committed (pip installs and the image read them from the package); `compile --check`
fails when one is not what its .po compiles to."""

from __future__ import annotations

import argparse
import contextlib
import io
import string
import sys
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

REPO = Path(__file__).resolve().parents[2]
MAPPING = REPO / "deploy" / "l10n" / "babel.cfg"
LOCALE_DIR = REPO / "observer" / "reports" / "locale"
UNEXTRACTED = "unextracted-keys.txt"
DOMAIN = "observer"
SOURCE_LOCALE = "en"
LOCALES = ("en", "zh_CN")
# Words.__call__ (named w, words, and self inside Words), Note(key, params), the table helpers
# that take a key (row) and utilisation_chart (its title), and a run's why (_said).
KEYWORDS: dict[str, tuple[int, ...] | None] = {
    "w": None,
    "_note": None,
    "words": None,
    "self": None,
    "Note": None,
    "row": None,
    "utilisation_chart": None,
    "_said": None,
}


def po_path(locale_dir: Path, locale: str, suffix: str = ".po") -> Path:
    return locale_dir / locale / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


def unextracted(locale_dir: Path) -> Iterator[str]:
    for line in (locale_dir / UNEXTRACTED).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            yield line.strip()


def extract(locale_dir: Path = LOCALE_DIR) -> Catalog:
    with MAPPING.open(encoding="utf-8") as f:
        method_map, options_map = parse_mapping_cfg(f)
    pot = Catalog(domain=DOMAIN, project="gpu-soak-observer", fuzzy=False)
    with contextlib.redirect_stderr(io.StringIO()):
        # Babel writes a line for every f-string; the keys built with one are in UNEXTRACTED.
        found = extract_from_dir(
            str(REPO), method_map, options_map, keywords=KEYWORDS, comment_tags=()
        )
        for filename, lineno, message, _comments, _context in found:
            pot.add(message, locations=[(filename, lineno)])
    for key in unextracted(locale_dir):
        pot.add(key, locations=[(f"observer/reports/locale/{UNEXTRACTED}", 0)])
    return pot


def read(locale_dir: Path, locale: str) -> Catalog:
    with po_path(locale_dir, locale).open("rb") as f:
        return read_po(f, locale=locale, domain=DOMAIN)


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def problems(locale_dir: Path = LOCALE_DIR) -> list[str]:
    keys = {m.id for m in extract(locale_dir) if m.id}
    catalogs = {locale: read(locale_dir, locale) for locale in LOCALES}
    source = catalogs[SOURCE_LOCALE]
    found = []
    for locale, catalog in catalogs.items():
        name = po_path(locale_dir, locale).relative_to(locale_dir)
        for key in sorted(keys):
            message = catalog.get(key)
            if message is None:
                found.append(f"{name}: {key}: missing")
            elif not message.string:
                found.append(f"{name}: {key}: untranslated")
            elif message.fuzzy:
                found.append(f"{name}: {key}: fuzzy")
            elif locale != SOURCE_LOCALE and (english := source.get(key)) and english.string:
                theirs, ours = placeholders(english.string), placeholders(message.string)
                if theirs != ours:
                    found.append(
                        f"{name}: {key}: placeholders {sorted(ours)}, English {sorted(theirs)}"
                    )
        found += [
            f"{name}: {m.id}: not used by the code (built dynamically? list it in {UNEXTRACTED})"
            for m in catalog
            if m.id and m.id not in keys
        ]
    return found


def compiled(locale_dir: Path, locale: str) -> bytes:
    out = io.BytesIO()
    write_mo(out, read(locale_dir, locale), use_fuzzy=False)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("extract", "check", "compile"))
    parser.add_argument("--locale-dir", type=Path, default=LOCALE_DIR)
    parser.add_argument("--output", type=Path, default=REPO / ".build" / "locale" / "observer.pot")
    parser.add_argument("--check", action="store_true", help="compile: only compare")
    args = parser.parse_args(argv)
    if args.command == "extract":
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with args.output.open("wb") as f:
            write_po(f, extract(args.locale_dir), width=100, sort_output=True, omit_header=True)
        return 0
    if args.command == "check":
        found = problems(args.locale_dir)
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    stale = []
    for locale in LOCALES:
        mo, data = po_path(args.locale_dir, locale, ".mo"), compiled(args.locale_dir, locale)
        if args.check:
            if not mo.exists() or mo.read_bytes() != data:
                stale.append(f"{mo.relative_to(args.locale_dir)}: not compiled from its .po")
        else:
            mo.write_bytes(data)
    for line in stale:
        print(f"{line} (make locale)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
