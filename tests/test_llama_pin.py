"""The pinned llama-cpp-python build (pipeline.llm.llama_pin): one version everywhere it is named,
a clear message on a CPU that cannot run it, and a word once per run about a live call on another build."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.llm import llama_pin
from pipeline.llm.llama_pin import BUILD, VERSION, foreign_build, missing_cpu_flags
from pipeline.llm.settings import EngineSettings
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message
from tests.conftest import ROOT

ZEN3 = "processor : 0\nflags\t\t: fpu sse sse2 ssse3 fma avx f16c avx2 avx512f\n"
SANDY_BRIDGE = "processor : 0\nflags\t\t: fpu sse sse2 ssse3 avx\n"


def test_the_version_is_the_same_in_pyproject_the_lock_and_the_makefile() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"llama-cpp-python=={VERSION}"' in pyproject
    assert f'"llama-cpp-python[server]=={VERSION}"' in pyproject
    assert re.search(
        rf"^llama-cpp-python=={re.escape(VERSION)}$", (ROOT / "requirements/lock.txt").read_text(), re.M
    )
    shown = subprocess.run(
        ["make", "-s", "-n", "install", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert f"'llama-cpp-python=={VERSION}'" in shown and f'CMAKE_ARGS="{llama_pin.CMAKE_ARGS}"' in shown


def test_every_locked_dependency_is_pinned_exactly() -> None:
    lines = [
        line.split(";")[0].strip()
        for line in (ROOT / "requirements/lock.txt").read_text().splitlines()
        if line and not line.startswith((" ", "#"))
    ]
    assert len(lines) > 50 and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[^=<>~ ]+", line) for line in lines)


def test_a_cpu_without_avx2_is_named_on_x86_only() -> None:
    assert missing_cpu_flags(ZEN3, "x86_64") == ()
    assert missing_cpu_flags(SANDY_BRIDGE, "x86_64") == ("avx2", "fma", "f16c")
    assert missing_cpu_flags(SANDY_BRIDGE, "aarch64") == ()  # Arm ignores the switches
    assert missing_cpu_flags("no flags line", "x86_64") == ()  # cannot tell: no false alarm


def test_the_install_check_warns_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(llama_pin, "missing_cpu_flags", lambda: ("avx2",))
    assert llama_pin.main(["llama_pin.py", "--check-cpu"]) == 0
    assert "lacks AVX2" in capsys.readouterr().err
    ran = subprocess.run(
        [sys.executable, "-I", str(ROOT / "pipeline/llm/llama_pin.py")], capture_output=True, text=True
    )
    assert ran.returncode == 0 and f"VERSION={VERSION}" in ran.stdout


def test_the_embedded_backend_says_so_before_loading_the_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pipeline.llm.backends import embedded
    from pipeline.llm.settings import LLMSettings

    monkeypatch.setattr(embedded, "missing_cpu_flags", lambda: ("avx2", "fma"))
    backend = embedded.EmbeddedBackend(LLMSettings(), model_path=tmp_path / "m.gguf")
    with pytest.raises(ConfigError, match=r"lacks AVX2, FMA.*make replay"):
        backend._load(4096)


def test_foreign_build_names_what_differs() -> None:
    assert foreign_build({}) is None  # not the embedded model's reply
    assert foreign_build({"llama_cpp_version": VERSION, "llama_cpp_build": BUILD}) is None
    said = foreign_build({"llama_cpp_version": "0.3.40", "llama_cpp_build": "AVX512 AMX"})
    assert said is not None and "0.3.40" in said and "AVX512 AMX" in said


def test_a_live_call_on_another_build_is_reported_once_per_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from pipeline.llm.backends.fake import FakeBackend
    from pipeline.llm.session import open_session

    class OtherBuild(FakeBackend):
        def chat(self, request: ChatRequest) -> ChatReply:
            reply = super().chat(request)
            return reply.model_copy(
                update={"meta": {"llama_cpp_version": "0.3.99", "llama_cpp_build": BUILD}}
            )

    params = EngineSettings.model_validate(
        {
            "llm": {"backend": "fake", "model": "m"},
            "cache": {"dir": str(tmp_path / "c"), "recordings": "r"},
        }
    )
    session = open_session(params, "judge", root=tmp_path, backend_factory=lambda: OtherBuild())
    with caplog.at_level(logging.WARNING, logger="pipeline.llm.asking"):
        for n in range(3):
            request = ChatRequest(messages=(Message(role="user", content=f"q{n}"),))
            session.chat(request, CallContext(stage="judge", item=str(n)))
    session.close()
    said = [r for r in caplog.records if "another llama.cpp build" in r.getMessage()]
    assert len(said) == 1 and "0.3.99 (pinned: 0.3.36)" in said[0].getMessage()
