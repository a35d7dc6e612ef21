"""The reports' words in the chosen language (the gettext catalogues under
observer/reports/locale), and numbers, durations and times written the way each language writes
them (Babel, from CLDR). Builders speak in Notes; only rendering picks the language."""

from __future__ import annotations

import gettext
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from functools import cache, lru_cache
from pathlib import Path
from typing import Literal

from babel import Locale
from babel.dates import format_date, format_datetime, get_timezone_name
from babel.lists import format_list
from babel.numbers import format_decimal, format_percent
from babel.units import format_unit

from observer.domain import Expectation, JsonValue, duration_parts
from observer.reports.compute.findings import Sentence
from observer.reports.compute.notes import Note

Language = Literal["en", "zh-CN"]
LANGUAGES: tuple[Language, ...] = ("en", "zh-CN")

LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
_DOMAIN = "observer"
_LOCALES: dict[Language, str] = {"en": "en", "zh-CN": "zh_CN"}
_LOCALE = {language: Locale.parse(name) for language, name in _LOCALES.items()}
# A day and an instant: English keeps ISO dates (what operators grep for); Chinese the CLDR
# full date (2026年12月4日星期五) and long date with the time.
_DAY = {"en": "EEE yyyy-MM-dd", "zh-CN": "full"}
_INSTANT = {"en": "yyyy-MM-dd HH:mm", "zh-CN": "y年M月d日 HH:mm"}
# On a day the zone's offset changes an hour is repeated or skipped: its instants say their
# zone ("01:30 CDT", "01:30 CST"; an offset where CLDR has no abbreviation).
_ZONE_SUFFIX = " z"
# A zone as its readers call it where CLDR's name is not what they say (中国标准时间).
_READERS_ZONE = {("zh-CN", "Asia/Shanghai"): "北京时间"}
# How a probe was expected to end (observer.domain.Expectation): refused, or failed.
_REFUSALS = frozenset({Expectation.BLOCKED, Expectation.DENIED})
_FAILURES = frozenset({Expectation.FAIL, Expectation.FAIL_TO_START, Expectation.OOM})
# Memory in the binary units NVML and nvidia-smi count in (CLDR has only the decimal GB and
# MB): GiB with one decimal from 1 GiB, whole MiB under it; the number as the language writes it.
_BINARY_UNITS = ((2**30, "GiB", "#,##0.0"), (2**20, "MiB", "#,##0"))
# Durations in CLDR's short units ("6小时23分钟"), but English keeps the SI symbols the
# detectors' rule texts use ("> 60 s"): CLDR's "2 hr 20 min", "0 sec" read worse beside them.
_SI_UNITS = {
    "en": {
        "duration-day": "{0} d",
        "duration-hour": "{0} h",
        "duration-minute": "{0} min",
        "duration-second": "{0} s",
    }
}


@cache
def _messages(language: Language) -> gettext.NullTranslations:
    """The language's compiled catalogue over the English one, for a key it lacks."""
    return gettext.translation(_DOMAIN, LOCALE_DIR, languages=[_LOCALES[language], "en"])


class Words:
    """Everything language-dependent a renderer needs."""

    def __init__(self, language: Language, timezone: tzinfo) -> None:
        self.language = language
        self.timezone = timezone
        self._messages = _messages(language)

    def __call__(self, key: str, **params: JsonValue) -> str:
        template = self._messages.gettext(key)
        return template.format(**{name: self._param(name, value) for name, value in params.items()})

    def note(self, note: Note) -> str:
        return self(note.key, **dict(note.params))

    def finding(self, sentence: Sentence | None, summary: str) -> str:
        """A finding's sentence and its details; one an older observer stored without the
        evidence its sentence needs: its stored English, quoted."""
        if sentence is None:
            return self("finding.stored", summary=summary)
        head, *details = (self.note(n) for n in sentence)
        if not details:
            return head
        return self("finding.details", head=head, details=self("finding.separator").join(details))

    def quoted(self, words: str) -> str:
        """The platform's (or a process's) own words, quoted as the language quotes."""
        return self("quote.platform", text=words)

    def aside(self, text: str, aside: str) -> str:
        """`text` with `aside` in parentheses, as the language writes them (full-width in
        Chinese, with no space before)."""
        return self("word.aside", text=text, aside=aside)

    def labelled(self, label: str, value: str) -> str:
        """A value after its label (a chart's tooltip), with the language's colon."""
        return self("word.labelled", label=label, value=value)

    def names(self, names: Sequence[str], more: int = 0) -> str:
        """Names (tenants, pools, nodes, probes) listed as the language lists them, and how
        many more a list cut short leaves out."""
        listed = self("names.separator").join(names) or "—"
        return self("names.more", names=listed, more=more) if more else listed

    def lines(self, texts: Iterable[str]) -> str:
        """Several items in one table cell."""
        return self("cell.separator").join(texts)

    def evidence(self, notes: Sequence[Note]) -> str:
        return self.lines(self.note(n) for n in notes)

    def detector(self, detector: str) -> str:
        """A detector by the name the catalogue gives it (English keeps the id, which metrics
        and alerts label it by); one the catalogue does not know, by its id."""
        key = f"detector.{detector}"
        return self(key) if self._known(key) else detector

    def outcome(self, outcome: str, expectation: str) -> str:
        """How a run ended, read against how it was expected to end: a pass of a probe the
        platform must refuse, or must fail, says so ("passed" alone reads as "approved")."""
        if outcome == "passed" and expectation in _REFUSALS:
            return self("outcome.passed.refused")
        if outcome == "passed" and expectation in _FAILURES:
            return self("outcome.passed.failed")
        return self(f"outcome.{outcome}")

    def severity(self, severity: str) -> str:
        """A severity in the catalogue's words; one the catalogue does not know (an
        Alertmanager label is whatever the platform's rules say) in the platform's words."""
        key = f"severity.{severity}"
        return self(key) if self._known(key) else self.quoted(severity)

    def _known(self, key: str) -> bool:
        """Whether the catalogue has `key` (gettext answers an unknown key with itself)."""
        return self._messages.gettext(key) != key

    def _param(self, name: str, value: JsonValue) -> str:
        if value is None:
            return self("word.not_observed")
        if name.endswith("_seconds") and isinstance(value, int | float):
            return self.duration(float(value))
        if (name == "share" or name.endswith("_share")) and isinstance(value, int | float):
            return self.percent(100.0 * value)
        if name.endswith("_bytes") and isinstance(value, int | float):
            return self.memory(value)
        if name == "subject" and isinstance(value, Mapping):
            return self.subject(value)
        if name == "criterion" and isinstance(value, str):
            return self(f"crit.{value}")
        if name == "criteria" and isinstance(value, list):
            return self.names([self(f"crit.{c}") for c in value])
        if name in ("detector", "fault") and isinstance(value, str):
            return self.detector(value)
        if name == "detectors" and isinstance(value, list):
            return self.names([self.detector(str(d)) for d in value])
        if name == "detector_counts" and isinstance(value, Mapping):
            return self.names(
                [self("detector.counted", detector=d, count=n) for d, n in value.items()]
            )
        if name == "layer" and isinstance(value, str):
            return self(f"src.{value}")
        if name == "basis" and isinstance(value, str):
            return self(f"basis.{value}")
        if name == "why" and isinstance(value, str):
            return self(f"coverage.why.{value}")
        if (name == "words" or name.endswith("_words")) and isinstance(value, str):
            # The platform's (or a process's) own words: quoted, never translated.
            return self.quoted(value)
        if name == "outcome" and isinstance(value, str) and self._known(f"outcome.{value}"):
            return self(f"outcome.{value}")
        if name == "action" and isinstance(value, str) and self._known(f"action.{value}"):
            return self(f"action.{value}")
        if name == "expectation" and isinstance(value, str):
            return self(f"expectation.{value}")
        if name == "xid_meaning" and isinstance(value, str):
            return self(f"xid.{value}" if self._known(f"xid.{value}") else "xid.unknown")
        if name == "xid_class_id" and isinstance(value, str):
            return self(f"xid_class.{value}")
        if (name == "at" or name.endswith("_at")) and isinstance(value, str):
            return self.instant(datetime.fromisoformat(value))
        if isinstance(value, Mapping):
            # Names, each with its figure (a tenant's users and their GPUs).
            return self.names([self("names.figure", name=k, figure=v) for k, v in value.items()])
        if isinstance(value, list | tuple):
            shown, more = (value[:-1], value[-1]) if value and _is_count(value[-1]) else (value, 0)
            return self.names([str(v) for v in shown], more)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, int):
            return self.integer(value)
        if isinstance(value, float):
            return self.decimal(value)
        return str(value)

    def subject(self, parts: Mapping[str, Sequence[str]]) -> str:
        """Whom and where, part by part (Subjects.params): only the parts that name
        something; none: the whole platform."""
        named = [self(f"subject.{part}", names=self.names(names)) for part, names in parts.items()]
        return self("subject.separator").join(named) or self("subject.none")

    # -- numbers -------------------------------------------------------------------------

    def integer(self, value: int | None) -> str:
        if value is None:
            return self("word.not_observed")
        return _number(value, "#,##0", self.language)

    def decimal(self, value: float | None, places: int = 1) -> str:
        if value is None:
            return self("word.not_observed")
        return _number(value, "#,##0." + "0" * places, self.language)

    def percent(self, value: float | None) -> str:
        """`value` in percent (0..100)."""
        return self("word.not_observed") if value is None else _percent(value, self.language)

    def share(self, value: float | None) -> str:
        """`value` as a fraction (0..1)."""
        return self.percent(None if value is None else 100.0 * value)

    def duration(self, seconds: float | None) -> str:
        return self("word.not_observed") if seconds is None else _duration(seconds, self.language)

    def memory(self, size_bytes: float | None) -> str:
        if size_bytes is None:
            return self("word.not_observed")
        size, symbol, pattern = next(
            (unit for unit in _BINARY_UNITS if size_bytes >= unit[0]), _BINARY_UNITS[-1]
        )
        return f"{_number(size_bytes / size, pattern, self.language)} {symbol}"

    # -- times ---------------------------------------------------------------------------

    def day(self, value: date) -> str:
        return format_date(value, _DAY[self.language], locale=_LOCALE[self.language])

    def instant(self, value: datetime | None) -> str:
        """In the platform's timezone, which the page names once (`zone`); with its zone on a
        day its offset changes."""
        return "—" if value is None else _instant(value, self.timezone, self.language)

    def zone(self, start: datetime, end: datetime) -> str:
        """The platform's timezone as its readers know it, with its UTC offset over [start,
        end): both offsets, and the name of neither, when it changes in between."""
        local = [at.astimezone(self.timezone) for at in (start, end - timedelta(microseconds=1))]
        offsets = list(dict.fromkeys(_utc_offset(at) for at in local))
        readers = _READERS_ZONE.get((self.language, str(self.timezone)))
        # One offset: its own name (China Standard Time); two: the zone's (Central Time).
        named = local[0] if len(offsets) == 1 else self.timezone
        name = readers or get_timezone_name(named, locale=_LOCALE[self.language])
        return self.aside(name, "/".join(offsets))


def _is_count(value: JsonValue) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Babel takes tens of microseconds a number and a report writes the same counts, shares,
# durations and minutes thousands of times: each text is made once per report.


def forget_texts() -> None:
    """Let go of the texts made for the report just rendered. Kept, a soak's new instants
    and figures filled the caches day after day, and their entries, made while the report's
    inputs were in memory, kept the daemon's memory at the size of its largest report."""
    for made in (_number, _percent, _duration, _instant):
        made.cache_clear()


@lru_cache(maxsize=16384)
def _number(value: float | Decimal, pattern: str, language: Language) -> str:
    return format_decimal(value, pattern, locale=_LOCALE[language])


@lru_cache(maxsize=16384)
def _percent(value: float, language: Language) -> str:
    return format_percent(value / 100.0, "#,##0.0%", locale=_LOCALE[language])


@lru_cache(maxsize=16384)
def _duration(seconds: float, language: Language) -> str:
    shown = [_unit(n, f"duration-{unit}", language) for n, unit in duration_parts(seconds)]
    return format_list(shown, style="unit-narrow", locale=_LOCALE[language])


def _unit(value: float | Decimal, unit: str, language: Language) -> str:
    symbols = _SI_UNITS.get(language)
    if symbols is not None:
        return symbols[unit].format(_number(value, "#,##0.#", language))
    return format_unit(value, unit, length="short", format="#,##0.#", locale=_LOCALE[language])


@lru_cache(maxsize=16384)
def _instant(value: datetime, timezone: tzinfo, language: Language) -> str:
    day = datetime.combine(value.astimezone(timezone).date(), time(), timezone)
    changes = day.utcoffset() != (day + timedelta(days=1)).utcoffset()
    pattern = _INSTANT[language] + (_ZONE_SUFFIX if changes else "")
    return format_datetime(value, pattern, tzinfo=timezone, locale=_LOCALE[language])


def _utc_offset(at: datetime) -> str:
    """UTC+8, UTC+5:30, UTC-6, UTC."""
    offset = at.utcoffset()
    minutes = 0 if offset is None else round(offset.total_seconds() / 60)
    if minutes == 0:
        return "UTC"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{'+' if minutes > 0 else '-'}{hours}" + (f":{rest:02d}" if rest else "")
