"""The words around names, numbers and the platform's own words, as each language writes them:
an aside in parentheses (full-width in Chinese), a list of names (「、」 in Chinese), an
Alertmanager severity (the catalogue's word, or the platform's quoted), an unaudited
intervention's reason (the operator's words, quoted), a failure's evidence (a sentence of the
report's language around its codes and names)."""

from __future__ import annotations

from observer.domain import Expectation, FindingKind, Outcome
from observer.records import StoredAlert, StoredNodeChange
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.findings import describe
from observer.reports.compute.notes import Note, named
from observer.reports.compute.verdict import VerdictInputs, build_verdict
from observer.reports.render.blocks import Rendered
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language, Words
from observer.reports.render.verdict import render_verdict
from tests.reports.builders import DAY, RULES, TZ, at, context, finding, node, run

EN, ZH = Words("en", TZ), Words("zh-CN", TZ)


def _rendered(data: PeriodData, language: Language) -> Rendered:
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))
    return render_daily(report, language)


def _daily(data: PeriodData, language: Language) -> str:
    return _rendered(data, language).markdown


def test_an_aside_is_in_full_width_parentheses_in_chinese_only():
    assert EN.aside("2 h", "1.5%") == "2 h (1.5%)"
    assert ZH.aside("2小时", "1.5%") == "2小时（1.5%）"

    zh, en = _daily(PeriodData(DAY), "zh-CN"), _daily(PeriodData(DAY), "en")
    assert "| 观测盲区时长 | 1天（100.0%） |" in zh
    assert "| 前一日（平均） | 观察期至今（平均） |" in zh
    assert "| Observer blind time | 1 d (100.0%) |" in en
    assert "| Previous day (Average) | Soak to date (Average) |" in en
    # Still a figure, right-aligned, in the HTML page.
    assert '<td class="num">1天（100.0%）</td>' in _rendered(PeriodData(DAY), "zh-CN").html


def test_names_are_listed_with_the_chinese_enumeration_comma():
    assert EN.names(["team-a", "team-b", "team-c"]) == "team-a, team-b, team-c"
    assert ZH.names(["team-a", "team-b", "team-c"]) == "team-a、team-b、team-c"
    assert ZH.subject({"tenants": ["team-a", "team-b"], "nodes": ["n1"]}) == (
        "租户 team-a、team-b；节点 n1"
    )
    # A large fleet's nodes are named up to a limit, the rest counted.
    cut = Note("note.health_not_sampled", {"nodes": named(["n1", "n2", "n3"], 2)})
    assert EN.note(cut).endswith(": n1, n2 (+1).")
    assert ZH.note(cut).endswith("：n1、n2（另有 1 个）。")

    failed = [
        run(tenant=tenant, submitted=at(10), outcome=Outcome.FAILED, reason="Error", exit_code=1)
        for tenant in ("team-a", "team-b")
    ]
    assert "| team-a、team-b |" in _daily(PeriodData(DAY, runs=failed), "zh-CN")
    # The probes a reverification step reruns are names too.
    unplanned = Note("reverify.add_to_plan", {"probes": ["gpu-busy", "short"]})
    assert ZH.note(unplanned).startswith("本次稳定性观察的计划未运行 gpu-busy、short：")


def test_alertmanager_severities_in_the_catalogues_words_or_the_platforms_quoted():
    def alert(name: str, severity: str) -> StoredAlert:
        return StoredAlert(f"f-{name}", name, severity, at(10), None, at(10, 30), {})

    data = PeriodData(DAY, alerts=[alert("GPUDown", "critical"), alert("QueueSlow", "P2")])

    zh, en = _daily(data, "zh-CN"), _daily(data, "en")
    assert "| GPUDown | 严重 | 1 |" in zh and "| QueueSlow | 「P2」 | 1 |" in zh
    assert "| GPUDown | critical | 1 |" in en and "| QueueSlow | “P2” | 1 |" in en


def test_an_unaudited_interventions_reason_is_the_operators_words_quoted():
    drained = StoredNodeChange(at(10), node("n1", "a", 8, 0, "drained", "replace NIC"))
    resumed = StoredNodeChange(at(12), node("n1", "a", 8, 0, "idle"))
    soak = PeriodData(
        DAY,
        runs=[run(submitted=at(9))],
        nodes_at_start=[node("n1", "a", 8, 0, "idle")],
        node_changes=[drained, resumed],
    )
    verdict = build_verdict(VerdictInputs(context(), soak, {}, RULES))

    zh = render_verdict(verdict, "zh-CN").markdown
    en = render_verdict(verdict, "en").markdown
    assert "未登记：2026年12月1日 10:00，node=n1：节点被 drain（「replace NIC」）。" in zh
    assert "Not recorded: node drained on node=n1 at 2026-12-01 10:00 (“replace NIC”)." in en
    assert "未登记：2026年12月1日 12:00，node=n1：节点恢复（「replace NIC」）。" in zh


def _row(markdown: str, probe: str) -> str:
    """The day's task row of the one run of `probe`."""
    (row,) = [line for line in markdown.splitlines() if f"| {probe} |" in line and "卡 ×" in line]
    return row


def test_a_probe_refused_or_failed_as_expected_reads_as_expected_not_as_passed():
    """'通过' beside an over-quota request reads as 'approved': a pass of a probe the platform
    must refuse (or fail) says that it did."""
    runs = [
        run(probe="short", submitted=at(10)),
        run(probe="isolation", submitted=at(10), expectation=Expectation.DENIED, wait_seconds=None),
        run(probe="quota", submitted=at(10), expectation=Expectation.BLOCKED, wait_seconds=None),
        run(probe="fail-exit", submitted=at(10), expectation=Expectation.FAIL, exit_code=3),
    ]
    zh = _daily(PeriodData(DAY, runs=runs), "zh-CN")

    assert "| 通过 |" in _row(zh, "short")
    assert "| 符合预期（已拒绝） |" in _row(zh, "isolation")
    assert "| 符合预期（已拒绝） |" in _row(zh, "quota")
    assert "| 符合预期（已失败） |" in _row(zh, "fail-exit")
    assert "| passed (refused) |" in _daily(PeriodData(DAY, runs=runs), "en")


def test_detectors_are_named_in_chinese_and_by_their_ids_in_english():
    found = [
        finding("log_loss", at(10), None, kind=FindingKind.EVENT, pipeline="loki", run_id="r1"),
        finding("unreleased_memory", at(10), at(11), node="n1"),
    ]
    zh = _rendered(PeriodData(DAY, findings=found), "zh-CN")
    en = _daily(PeriodData(DAY, findings=found), "en")

    assert "| 日志丢失 | 0 | 0 | 0 | 1 |" in zh.markdown
    assert "| 显存未释放 | 1 | 1 | 0 | 0 |" in zh.markdown
    assert "| log_loss | 0 | 0 | 0 | 1 |" in en
    assert "| 2026年12月1日 10:00 | 2026年12月1日 11:00 | 显存未释放 | 警告 |" in zh.markdown
    # The evidence too is headed by the detector's name.
    assert "<details><summary>日志丢失 · pipeline=loki, run_id=r1 · " in zh.markdown
    # And why the observer was blind: the scheduler's snapshots missing, in words.
    assert "| 调度器 | snapshots | 调度器快照间隔过长 |" in zh.markdown


def test_a_findings_evidence_is_summed_up_in_the_reports_language():
    lost = finding("gpu_lost", at(10), None, node="n1", gpu="0")
    sentence = describe(lost.detector, lost.subject, lost.evidence)
    data = PeriodData(DAY, findings=[lost])

    chinese = ZH.finding(sentence, lost.summary)
    assert any("\u4e00" <= c <= "\u9fff" for c in chinese)
    assert f'"summary": "{chinese}"' in _daily(data, "zh-CN")
    # In English, the summary the detector stored.
    assert f'"summary": "{lost.summary}"' in _daily(data, "en")
