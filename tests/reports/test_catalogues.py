"""The gettext catalogues: every key the code uses is translated in both languages with the
English placeholders, the committed .mo files are what their .po files compile to, and the
reports read them. The check is deploy/l10n/messages.py, run as `make locale` runs it, and
shown failing on broken copies."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from observer.reports.render.i18n import LOCALE_DIR, Words
from tests.reports.test_i18n import SHANGHAI

REPO = Path(__file__).resolve().parents[2]
MESSAGES = REPO / "deploy" / "l10n" / "messages.py"


def messages(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MESSAGES), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def po(locale_dir: Path, locale: str) -> Path:
    return locale_dir / locale / "LC_MESSAGES" / "observer.po"


def read(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f)


def edit(locale_dir: Path, locale: str, change: Callable[[Catalog], None]) -> None:
    catalog = read(po(locale_dir, locale))
    change(catalog)
    with po(locale_dir, locale).open("wb") as f:
        write_po(f, catalog, width=100, no_location=True, sort_output=True)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LOCALE_DIR, tmp_path / "locale"))


def test_the_catalogues_pass_the_check_and_the_mo_files_are_current():
    check = messages("check")
    assert (check.returncode, check.stderr) == (0, "")
    compiled = messages("compile", "--check")
    assert (compiled.returncode, compiled.stderr) == (0, "")


def test_the_pot_holds_the_extracted_and_the_listed_keys(tmp_path):
    pot = tmp_path / "observer.pot"
    assert messages("extract", "--output", pot).returncode == 0
    keys = {m.id for m in read(pot) if m.id}
    assert "title.verdict" in keys  # a literal key: Words.__call__
    assert "scope.blind" in keys  # a literal key: Note(...)
    assert "chart.util_by_hour" in keys  # utilisation_chart's title
    assert "crit.tenant_isolation" in keys  # built: f"crit.{criterion}", listed
    assert keys == {m.id for m in read(po(LOCALE_DIR, "zh_CN")) if m.id}


def remove(key: str) -> Callable[[Catalog], None]:
    return lambda catalog: catalog.delete(key)


def untranslate(key: str) -> Callable[[Catalog], None]:
    def change(catalog: Catalog) -> None:
        catalog[key].string = ""

    return change


def make_fuzzy(key: str) -> Callable[[Catalog], None]:
    return lambda catalog: catalog[key].flags.add("fuzzy")


def rename_placeholder(key: str, old: str, new: str) -> Callable[[Catalog], None]:
    def change(catalog: Catalog) -> None:
        catalog[key].string = str(catalog[key].string).replace(old, new)

    return change


def add_unused(catalog: Catalog) -> None:
    catalog.add("fig.nobody_uses_this", "无人使用")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (remove("title.verdict"), "zh_CN/LC_MESSAGES/observer.po: title.verdict: missing"),
        (remove("crit.gpu_health"), "zh_CN/LC_MESSAGES/observer.po: crit.gpu_health: missing"),
        (untranslate("sec.findings"), "zh_CN/LC_MESSAGES/observer.po: sec.findings: untranslated"),
        (make_fuzzy("sec.findings"), "zh_CN/LC_MESSAGES/observer.po: sec.findings: fuzzy"),
        (
            rename_placeholder("title.daily", "{day}", "{date}"),
            "zh_CN/LC_MESSAGES/observer.po: title.daily: placeholders ['date'], English ['day']",
        ),
        (add_unused, "zh_CN/LC_MESSAGES/observer.po: fig.nobody_uses_this: not used by the code"),
    ],
)
def test_the_check_fails_on_a_broken_copy(copy, change, problem):
    assert messages("check", "--locale-dir", copy).returncode == 0
    edit(copy, "zh_CN", change)
    check = messages("check", "--locale-dir", copy)
    assert check.returncode == 1
    assert problem in check.stderr


def test_a_key_the_code_lists_but_no_catalogue_has_fails(copy):
    listed = copy / "unextracted-keys.txt"
    listed.write_text(listed.read_text(encoding="utf-8") + "crit.new_rule\n", encoding="utf-8")
    check = messages("check", "--locale-dir", copy)
    assert check.returncode == 1
    assert "en/LC_MESSAGES/observer.po: crit.new_rule: missing" in check.stderr
    assert "zh_CN/LC_MESSAGES/observer.po: crit.new_rule: missing" in check.stderr


def test_an_edited_po_makes_its_mo_stale_until_compiled(copy):
    edit(copy, "zh_CN", rename_placeholder("sec.findings", "发现", "问题发现"))
    stale = messages("compile", "--check", "--locale-dir", copy)
    assert stale.returncode == 1
    assert "zh_CN/LC_MESSAGES/observer.mo: not compiled from its .po" in stale.stderr
    assert messages("compile", "--locale-dir", copy).returncode == 0
    assert messages("compile", "--check", "--locale-dir", copy).returncode == 0


@pytest.mark.parametrize(("language", "locale"), [("en", "en"), ("zh-CN", "zh_CN")])
def test_the_reports_read_every_word_from_the_compiled_catalogue(language, locale):
    words = Words(language, SHANGHAI)
    catalog = read(po(LOCALE_DIR, locale))
    plain = {str(m.id): str(m.string) for m in catalog if m.id and "{" not in str(m.string)}
    assert len(plain) > 100
    for key, text in plain.items():
        assert words(key) == text, key


def test_a_key_no_catalogue_has_reads_as_itself():
    assert Words("zh-CN", SHANGHAI)("fig.not_a_key") == "fig.not_a_key"
