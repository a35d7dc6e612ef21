"""Settings: one typed root from YAML with OBSERVER_* overrides; `observer check-config`."""

from pathlib import Path

import pytest

from observer.errors import ConfigError
from observer.settings import load_settings
from tests.support.cli import run_cli

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: soak, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: observer, user: {token: not-a-secret}}]
contexts: [{name: soak, context: {cluster: soak, user: observer}}]
current-context: soak
"""


def test_defaults_need_no_file():
    settings = load_settings(None)
    assert settings.agent.interval_seconds == 1.0
    assert settings.agent.counters_interval_seconds == 60.0
    assert settings.detectors.node.grace_seconds == 60.0
    assert settings.storage.url is None


def test_the_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "c.yaml"
    config.write_text("agent:\n  interval_seconds: 2\n  listen_port: 9500\n")
    monkeypatch.setenv("OBSERVER_AGENT__LISTEN_PORT", "9600")
    monkeypatch.setenv("OBSERVER_STORAGE__URL", "postgresql+psycopg://observer@db/observer")
    settings = load_settings(config)
    assert settings.agent.interval_seconds == 2
    assert settings.agent.listen_port == 9600
    assert settings.storage.url == "postgresql+psycopg://observer@db/observer"


def test_an_environment_variable_that_names_no_setting_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch,
):
    # As a chart's Secret reference once was: the webhook would have been dropped silently.
    monkeypatch.setenv("OBSERVER_NOTIFY__FEISHU__WEBHOOK_URL", "https://open.feishu.cn/hook/x")
    monkeypatch.setenv("OBSERVER_CONTROLLER__LISTN_PORT", "9401")
    monkeypatch.setenv("OBSERVER_REPORTS__DELIVERY__FEISHU_URL", "https://open.feishu.cn/hook/x")
    monkeypatch.setenv("OBSERVER_CONTROLLER__SLURM__TENANT_USERS__RESEARCH", "alice")
    monkeypatch.setenv("OBSERVER_CONFIG", "/etc/observer/config.yaml")  # a file, not a setting
    with pytest.raises(ConfigError) as caught:
        load_settings(None)
    assert caught.value.problems == [
        "OBSERVER_NOTIFY__FEISHU__WEBHOOK_URL: names no setting (notify is not a settings group)",
        "controller.listn_port: unknown setting",
    ]


def test_every_problem_is_named_by_its_field_path(tmp_path: Path):
    config = tmp_path / "bad.yaml"
    config.write_text(
        "agent:\n  interval_seconds: 0\n  listen_port: 70000\n  colour: blue\n"
        "detectors:\n  node:\n    grace_seconds: -1\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert sorted(caught.value.problems) == [
        "agent.colour: unknown setting",
        "agent.interval_seconds: must be greater than 0",
        "agent.listen_port: must be less than or equal to 65535",
        "detectors.node.grace_seconds: must be greater than or equal to 0",
    ]


def test_rules_across_fields_name_the_field_at_fault(tmp_path: Path):
    config = tmp_path / "bad.yaml"
    config.write_text(
        "agent:\n  gpu_backend: replay\n  interval_seconds: 10\n  counters_interval_seconds: 5\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert sorted(caught.value.problems) == [
        "agent.counters_interval_seconds: must not be shorter than agent.interval_seconds",
        "agent.replay_trace_dir: is required when agent.gpu_backend is 'replay'",
    ]


@pytest.mark.parametrize(
    ("inference", "problem"),
    [
        (
            "name: Not_A_Label",
            "controller.inference.name: String should match pattern "
            "'^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$'",
        ),
        (
            "replicas: 3\n    scale_out_replicas: 2",
            "controller.inference.scale_out_replicas: must be at least replicas",
        ),
        (
            "tenant: nobody",
            "controller.inference.tenant: no tenant named 'nobody' (known: prod, research)",
        ),
    ],
)
def test_the_inference_probes_bad_settings_name_their_field(
    tmp_path: Path, inference: str, problem: str
):
    config = tmp_path / "bad.yaml"
    config.write_text(f"controller:\n  inference:\n    enabled: true\n    {inference}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert caught.value.problems == [problem]


@pytest.mark.parametrize(
    ("reports", "problem"),
    [
        (
            "task_types:\n    - {type: training}",
            "reports.task_types.0.queue: a rule names a queue, a priority or both",
        ),
        (
            "task_types:\n    - {type: research, queue: gpu}",
            "reports.task_types.0.type: must be 'training', 'inference', 'interactive', "
            "'batch' or 'other'",
        ),
        (
            'gpu_hour_price: {"h200-a": -1.5, "*": 2}',
            "reports.gpu_hour_price: a price is never negative (pool h200-a)",
        ),
        ("currency: ''", "reports.currency: String should have at least 1 character"),
    ],
)
def test_who_used_what_settings_name_their_field(tmp_path: Path, reports: str, problem: str):
    config = tmp_path / "bad.yaml"
    config.write_text(f"reports:\n  {reports}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert caught.value.problems == [problem]


EXAMPLES = sorted((Path(__file__).parent.parent / "deploy" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_config_is_valid(example: Path, tmp_path: Path):
    env: dict[str, str] = {}
    if "backend: kubernetes" in example.read_text():
        # Checked as on a machine that can reach a cluster: this one has neither the pod's
        # service-account token nor a kubeconfig, and check-config says so (tested apart).
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(KUBECONFIG)
        env["OBSERVER_CONTROLLER__KUBERNETES__KUBECONFIG_PATH"] = str(kubeconfig)
    result = run_cli("check-config", str(example), env=env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{example}: valid"


def test_check_config_exits_2_with_one_line_per_problem(tmp_path: Path):
    config = tmp_path / "bad.yaml"
    config.write_text("agent:\n  interval_seconds: 0\n  gpu_backend: cuda\n")
    result = run_cli("check-config", str(config))
    assert result.exit_code == 2
    assert sorted(result.stderr.splitlines()) == [
        "agent.gpu_backend: must be 'nvml' or 'replay'",
        "agent.interval_seconds: must be greater than 0",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("agent: [1,\n", "not valid YAML at line 2"),
        ("- just\n- a list\n", "the top level must be a mapping"),
    ],
)
def test_a_missing_or_unparsable_file_is_a_clear_error_not_a_traceback(
    tmp_path: Path, content: str | None, message: str
):
    config = tmp_path / "c.yaml"
    if content is not None:
        config.write_text(content)
    result = run_cli("check-config", str(config))
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
