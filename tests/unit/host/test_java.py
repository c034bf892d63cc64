from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from streamops.host.exceptions import JavaMissingError
from streamops.host.java import find_java, java_major


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ("garbage", None),
    ],
)
def test_java_major(text: str, major: int | None) -> None:
    assert java_major(text) == major


def _fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2019-01-15' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


def test_real_java_is_new_enough() -> None:
    _, major = find_java()
    assert major >= 17


def test_old_java_is_refused_with_install_hint(tmp_path: Path) -> None:
    home = _fake_java(tmp_path, "11.0.2")
    with pytest.raises(JavaMissingError) as err:
        find_java({"JAVA_HOME": str(home), "PATH": os.environ["PATH"]})
    assert "Java 11" in str(err.value) and "openjdk-17-jre-headless" in str(err.value)


def test_missing_java_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(JavaMissingError) as err:
        find_java({"PATH": str(tmp_path)})
    assert "not found" in str(err.value) and "Java 17" in str(err.value)


def test_java_home_without_java(tmp_path: Path) -> None:
    with pytest.raises(JavaMissingError, match="has no bin/java"):
        find_java({"JAVA_HOME": str(tmp_path), "PATH": ""})
