"""evloop.autotune and Loop(profile=...): the calibration returns a sane profile within its
time limit and saves it; a loop starts from a saved profile (argument or $EVLOOP_PROFILE)
where its own arguments leave things adaptive; a bad profile raises with its errno."""

from __future__ import annotations

import errno
import math
import pathlib

import pytest

import evloop

KEYS = {
    "version", "ncpu", "backend", "spin_ns", "spin_max_ns", "batch_budget", "wake_ns",
    "handoff_ns", "readiness_epoll_ns", "readiness_io_uring_ns", "readiness_kqueue_ns",
}


def write_profile(path: pathlib.Path, backend: str = "auto", budget: int = 1024,
                  spin: int = 15000, spin_max: int = 30000) -> pathlib.Path:
    path.write_text(
        "# evloop profile\n"
        f"version 1\nncpu 2\nbackend {backend}\nspin_ns {spin}\nspin_max_ns {spin_max}\n"
        f"batch_budget {budget}\n"
    )
    return path


@pytest.fixture
def no_env_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVLOOP_PROFILE", raising=False)
    monkeypatch.delenv("EVLOOP_BACKEND", raising=False)


def test_autotune_returns_a_sane_profile_and_saves_it(
        tmp_path: pathlib.Path, no_env_profile: None) -> None:
    # Its time limit is the C suite's to check (tests/test_autotune.c): a wall-clock bound
    # here failed once at load 12, with nothing wrong (a timed assertion, not a contract).
    path = tmp_path / "profile"
    p = evloop.autotune(0.3, save=path)
    assert set(p) == KEYS
    assert p["version"] == 1
    assert p["ncpu"] >= 1
    assert p["backend"] in evloop.backends()
    assert p[f"readiness_{p['backend']}_ns"] > 0
    assert 0 <= p["spin_ns"] <= p["spin_max_ns"] <= 200_000
    assert p["batch_budget"] in (64, 256, 1024, 4096)
    assert p["wake_ns"] > 0
    text = path.read_text()
    assert text.startswith("# evloop profile\n")
    assert f"batch_budget {p['batch_budget']}\n" in text
    with evloop.Loop(profile=path) as lp:
        st = lp.stats()
        assert st.profile_loaded is True
        assert st.batch_budget == p["batch_budget"]
        assert lp.backend == p["backend"]


def test_autotune_rejects_bad_arguments() -> None:
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            evloop.autotune(bad)


def test_autotune_reports_a_failed_save(tmp_path: pathlib.Path) -> None:
    with pytest.raises(evloop.Error) as ei:
        evloop.autotune(0.05, save=tmp_path / "no_such_dir" / "profile")
    assert ei.value.errno == errno.ENOENT


@pytest.mark.parametrize("variant", evloop.variants())
def test_a_loop_starts_from_a_profile_and_its_own_arguments_win(
        tmp_path: pathlib.Path, no_env_profile: None, variant: str) -> None:
    path = write_profile(tmp_path / "p", backend=evloop.backends()[-1])
    with evloop.Loop(variant=variant, profile=str(path)) as lp:
        st = lp.stats()
        assert st.profile_loaded is True
        assert (st.batch_budget, st.spin_ns) == (1024, 15000)
        assert lp.backend == evloop.backends()[-1]
    with evloop.Loop(variant=variant, profile=path, spin_ns=0, batch_budget=64,
                     backend=evloop.backends()[0]) as lp:
        st = lp.stats()
        assert (st.batch_budget, st.spin_ns) == (64, 0)
        assert lp.backend == evloop.backends()[0]
    with evloop.Loop(variant=variant) as lp:
        assert lp.stats().profile_loaded is False


def test_the_evloop_profile_variable_is_honoured(tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_profile(tmp_path / "p", budget=2048)
    monkeypatch.setenv("EVLOOP_PROFILE", str(path))
    with evloop.Loop() as lp:
        assert lp.stats().batch_budget == 2048
    with evloop.Loop(profile="") as lp:
        assert lp.stats().profile_loaded is False


def test_a_missing_or_malformed_profile_raises_with_its_errno(tmp_path: pathlib.Path) -> None:
    with pytest.raises(evloop.Error) as ei:
        evloop.Loop(profile=tmp_path / "missing")
    assert ei.value.errno == errno.ENOENT
    assert "missing" in str(ei.value)
    bad = tmp_path / "bad"
    bad.write_text("# evloop profile\nversion 1\nbatch_budget lots\n")
    with pytest.raises(evloop.Error) as ei:
        evloop.Loop(profile=bad)
    assert ei.value.errno == errno.EINVAL
