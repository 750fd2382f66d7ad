"""Security suite configuration.

The suite is meant to run against the built wheel installed in a fresh
virtualenv, never against the source tree: a release is what gets tested.
This conftest refuses to run when ``grelmicro.jwt`` or ``grelmicro_core`` is
imported from anywhere but the running interpreter's site-packages (set
``GRELMICRO_SECURITY_ALLOW_SOURCE=1`` to run it against an editable install
while developing).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The one token forge and the DPoP proof helpers live in tests/ (they import no
# product code); appended, so this directory's own modules (support) come first.
sys.path.append(str(REPO / "tests"))

import forge  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

for profile, examples in (("security", 300), ("security-long", 20_000)):
    settings.register_profile(
        profile,
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "security"))


def _installed_locations() -> dict[str, Path]:
    import grelmicro_core  # noqa: PLC0415

    import grelmicro.jwt  # noqa: PLC0415

    return {
        "grelmicro.jwt": Path(grelmicro.jwt.__file__).resolve(),
        "grelmicro_core": Path(grelmicro_core.__file__).resolve(),
    }


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to test anything but the installed wheels."""
    if os.environ.get("GRELMICRO_SECURITY_ALLOW_SOURCE") == "1":
        return
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    for name, where in _installed_locations().items():
        if not any(where.is_relative_to(s) for s in site):
            raise pytest.UsageError(
                f"{name} is imported from {where}, not from this interpreter's "
                f"site-packages {sorted(map(str, site))}: the security suite tests the "
                "installed wheel (run scripts/test-security.sh)"
            )
        if where.is_relative_to(REPO / "grelmicro") or where.is_relative_to(
            REPO / "grelmicro-core" / "python"
        ):
            raise pytest.UsageError(f"{name} is imported from the source tree: {where}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say which build is under test."""
    import importlib.metadata as md  # noqa: PLC0415

    lines = [f"{name}: {where}" for name, where in _installed_locations().items()]
    lines.append(
        "versions: grelmicro "
        + md.version("grelmicro")
        + ", grelmicro-core "
        + md.version("grelmicro-core")
    )
    return lines


@pytest.fixture(scope="session")
def ring() -> forge.KeyRing:
    """The suite's keys (generated once per run)."""
    return forge.KeyRing()


_TIMINGS: list[tuple[str, float, str]] = []


@pytest.fixture(scope="session")
def timings() -> list[tuple[str, float, str]]:
    """Where timing tests record ``(what, milliseconds, reason)``; printed at the end."""
    return _TIMINGS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how fast hostile tokens were refused (the README records these)."""
    if not _TIMINGS:
        return
    terminalreporter.section("time to refuse hostile tokens (best of 5)")
    for what, ms, reason in _TIMINGS:
        terminalreporter.write_line(f"{ms:10.3f} ms  {reason:<12} {what}")
