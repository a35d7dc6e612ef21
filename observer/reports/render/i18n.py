"""The reports' words in the chosen language (from catalog), and numbers, durations and times
written the way each language writes them. Builders speak in Notes; only rendering picks the
language."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, tzinfo
from typing import Literal

from observer.domain import JsonValue
from observer.reports.build.findings import Sentence
from observer.reports.build.notes import Note
from observer.reports.render.catalog import CATALOG

Language = Literal["en", "zh-CN"]
LANGUAGES: tuple[Language, ...] = ("en", "zh-CN")


_WEEKDAYS = {
    "en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"),
    "zh-CN": ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"),
}
_UNITS = {
    "en": {"d": " d", "h": " h", "min": " min", "s": " s"},
    "zh-CN": {"d": " 天", "h": " 小时", "min": " 分钟", "s": " 秒"},
}


class Words:
    """Everything language-dependent a renderer needs."""

    def __init__(self, language: Language, timezone: tzinfo) -> None:
        self.language = language
        self.timezone = timezone
        self._catalog = CATALOG[language]

    def __call__(self, key: str, **params: JsonValue) -> str:
        template = self._catalog.get(key)
        if template is None:
            template = CATALOG["en"].get(key, key)
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

    def _param(self, name: str, value: JsonValue) -> str:
        if value is None:
            return self("word.not_observed")
        if name.endswith("_seconds") and isinstance(value, int | float):
            return self.duration(float(value))
        if (name == "share" or name.endswith("_share")) and isinstance(value, int | float):
            return self.percent(100.0 * value)
        if name == "subject" and isinstance(value, Mapping):
            return self.subject(value)
        if name == "criterion" and isinstance(value, str):
            return self(f"crit.{value}")
        if name == "layer" and isinstance(value, str):
            return self(f"src.{value}")
        if name == "why" and isinstance(value, str):
            return self(f"coverage.why.{value}")
        if (name == "words" or name.endswith("_words")) and isinstance(value, str):
            # The platform's (or a process's) own words: quoted, never translated.
            return self._catalog["quote.platform"].format(text=value)
        if name == "outcome" and isinstance(value, str) and f"outcome.{value}" in self._catalog:
            return self(f"outcome.{value}")
        if name == "xid_meaning" and isinstance(value, str):
            return self(f"xid.{value}" if f"xid.{value}" in self._catalog else "xid.unknown")
        if name == "xid_class_id" and isinstance(value, str):
            return self(f"xid_class.{value}")
        if (name == "at" or name.endswith("_at")) and isinstance(value, str):
            return self.instant(datetime.fromisoformat(value))
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
        named = [self(f"subject.{part}", names=", ".join(names)) for part, names in parts.items()]
        return self("subject.separator").join(named) or self("subject.none")

    # -- numbers -------------------------------------------------------------------------

    def integer(self, value: int | None) -> str:
        return self("word.not_observed") if value is None else f"{value:,}"

    def decimal(self, value: float | None, places: int = 1) -> str:
        return self("word.not_observed") if value is None else f"{value:,.{places}f}"

    def percent(self, value: float | None) -> str:
        """`value` in percent (0..100)."""
        return self("word.not_observed") if value is None else f"{value:.1f}%"

    def share(self, value: float | None) -> str:
        """`value` as a fraction (0..1)."""
        return self.percent(None if value is None else 100.0 * value)

    def duration(self, seconds: float | None) -> str:
        if seconds is None:
            return self("word.not_observed")
        units = _UNITS[self.language]
        if seconds < 60:
            return f"{seconds:.1f}{units['s']}" if seconds % 1 else f"{seconds:.0f}{units['s']}"
        total = round(seconds)
        days, rest = divmod(total, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, secs = divmod(rest, 60)
        parts = [
            (days, "d"),
            (hours, "h"),
            (minutes, "min"),
            (secs if not days and not hours else 0, "s"),
        ]
        shown = [f"{n}{units[u]}" for n, u in parts if n][:2]
        return " ".join(shown)

    # -- times ---------------------------------------------------------------------------

    def day(self, value: date) -> str:
        weekday = _WEEKDAYS[self.language][value.weekday()]
        if self.language == "zh-CN":
            return f"{value.year}年{value.month}月{value.day}日（{weekday}）"
        return f"{weekday} {value.isoformat()}"

    def instant(self, value: datetime | None) -> str:
        """In the platform's timezone."""
        if value is None:
            return "—"
        local = value.astimezone(self.timezone)
        if self.language == "zh-CN":
            return f"{local.year}年{local.month}月{local.day}日 {local:%H:%M}"
        return f"{local:%Y-%m-%d %H:%M}"
