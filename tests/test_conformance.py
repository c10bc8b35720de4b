"""Every upstream vector file in tests/data/conformance passes, nothing skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rocketsim.conformance import CHECKERS, run_dir

VECTORS = Path(__file__).parent / "data" / "conformance"


@pytest.mark.parametrize("file_name", sorted(CHECKERS))
def test_vector_file_passes(file_name: str, tmp_path: Path) -> None:
    (tmp_path / file_name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file_name).symlink_to(VECTORS / file_name)
    results = list(run_dir(tmp_path))
    failures = [f"{r.vector_id}: {r.detail}" for r in results if r.status == "failed"]
    skipped = [r.vector_id for r in results if r.status == "skipped"]
    assert results, f"no vectors ran for {file_name}"
    assert not failures, "\n".join(failures[:20])
    assert not skipped, f"{len(skipped)} skipped, e.g. {skipped[:5]}"


def test_cli_summary_line_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "validators.json").symlink_to(VECTORS / "validators.json")
    done = subprocess.run(
        [sys.executable, "-m", "rocketsim.conformance", str(tmp_path)], capture_output=True, text=True
    )
    last = done.stdout.strip().splitlines()[-1]
    assert last.endswith("0 failed, 0 skipped") and not last.startswith("0 passed"), done.stdout
    assert done.returncode == 0


def test_cli_fails_when_nothing_ran(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rocketsim.conformance", str(tmp_path)], capture_output=True, text=True
    )
    assert done.stdout.strip().splitlines()[-1] == "0 passed, 0 failed, 0 skipped"
    assert done.returncode == 1


def test_cli_reports_a_broken_vector(tmp_path: Path) -> None:
    text = (VECTORS / "properties.json").read_text()
    # Corrupt one expected output: the runner must notice and exit 1.
    broken = text.replace('"utf8_len": 0', '"utf8_len": 1', 1)
    assert broken != text
    (tmp_path / "properties.json").write_text(broken)
    done = subprocess.run(
        [sys.executable, "-m", "rocketsim.conformance", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "FAILED" in done.stdout


REAL_CLIENT = VECTORS / "real_client"


def test_real_client_vectors_are_the_traces_converted(tmp_path: Path) -> None:
    # real_client/convert.py turns the recorded traces (real_client/traces) into the replay vectors;
    # the committed files are exactly its output
    done = subprocess.run(
        [sys.executable, str(REAL_CLIENT / "convert.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 27  # 4.9.8 ASYNC and ONEWAY, 5.3.3 ASYNC, and the 12 other tags' two modes
    for name in written:
        assert name in CHECKERS, name
        assert (tmp_path / name).read_text() == (VECTORS / name).read_text(), name


def test_async_replay_notices_a_retry_on_the_wrong_thread(tmp_path: Path) -> None:
    # Upstream (4.9.8 MQClientAPIImpl.onExceptionImpl, trace R22): the retry after the response-table scan
    # selects on the callback thread (NettyClientPublicExecutor_2, its own ThreadLocalIndex). A recording
    # that says the executor thread selected it is not what the model does: the replay fails there.
    lines = (VECTORS / "real_client_async_4_9.jsonl").read_text().splitlines()
    moved = [
        line.replace('"th":"C2"', '"th":"E1"', 1)
        if '"sc":"R22"' in line and '"k":3' in line and '"what":"select"' in line and '"i":1' in line
        else line
        for line in lines
    ]
    assert moved != lines
    (tmp_path / "real_client_async_4_9.jsonl").write_text("\n".join(moved) + "\n")
    failures = {r.vector_id: r.detail for r in run_dir(tmp_path) if r.status == "failed"}
    assert "R22/k=3" in failures and "on thread 'C2', recorded 'E1'" in failures["R22/k=3"]


def test_async_replay_holds_5_3_0_to_its_second_on_exception(tmp_path: Path) -> None:
    # 5.3.0 R22 send 3: its retry has no time left, and NettyRemotingClient.invokeAsync fails it twice
    # (operationFail with no return after it, then invokeAsyncImpl -> NettyRemotingAbstract.invoke0): the
    # application's onException runs twice. A recording without the second call, or with another text in
    # it, is not what the model does (ClientVersion.fails_late_async_request_twice).
    name = "real_client_async_5_3_0.jsonl"
    lines = (VECTORS / name).read_text().splitlines()
    second = [
        i
        for i, line in enumerate(lines)
        if '"sc":"R22"' in line and '"k":3,' in line and '"what":"result"' in line
    ][1]
    (tmp_path / name).write_text("\n".join(x for i, x in enumerate(lines) if i != second) + "\n")
    failures = {r.vector_id: r.detail for r in run_dir(tmp_path) if r.status == "failed"}
    assert list(failures) == ["R22/k=3"] and "did not end" in failures["R22/k=3"]
    other = [
        x.replace("unknown reason", "send request failed") if i == second else x for i, x in enumerate(lines)
    ]
    (tmp_path / name).write_text("\n".join(other) + "\n")
    failures = {r.vector_id: r.detail for r in run_dir(tmp_path) if r.status == "failed"}
    assert list(failures) == ["R22/k=3"] and "send request failed" in failures["R22/k=3"]


def test_grpc_replay_notices_a_reply_the_client_would_answer_differently(tmp_path: Path) -> None:
    # G07 send 1: the Proxy answers TOO_MANY_REQUESTS and the Python client (PY producer.py
    # __check_send_retry_condition) stops at once. Scripted as INTERNAL_SERVER_ERROR instead, the model
    # retries, which the recording does not show: the replay fails there, and at every later send of G07
    # (the retry's pick moved the round robin on), nowhere else.
    name = "grpc/grpc_python_5_1_2.jsonl"
    text = (VECTORS / name).read_text()
    broken = text.replace(
        '{"code": "TOO_MANY_REQUESTS", "message": "flow limit"}', '{"code": "INTERNAL_SERVER_ERROR"}', 1
    )
    assert broken != text
    (tmp_path / "grpc").mkdir()
    (tmp_path / name).write_text(broken)
    failures = {r.vector_id: r.detail for r in run_dir(tmp_path) if r.status == "failed"}
    assert "G07/send=1" in failures and "G07/send=0" not in failures
    assert all(v.startswith("G07/") for v in failures), failures
    assert failures["G07/send=1"].startswith("picks:")  # a second pick, for the retry
