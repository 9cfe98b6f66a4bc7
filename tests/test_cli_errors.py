"""The CLI facing bad input and a hostile environment (issue 11, defect 11): one line, never a traceback.

Exit status 2 is a user mistake (argument, config, input), 1 the environment
refusing (disk full, read-only or unwritable workspace). Stored text never
reaches the terminal raw. The OS edge (a write that fails with ENOSPC, an
open that fails with EROFS/EACCES: tests run as root, which ignores
permissions) is the only thing replaced; the code under test is real.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import run_cli
from memtier_plugin.cli import COMMANDS, MemtierGroup, cli
from memtier_plugin.store.episodic import Ledger

# What must never reach a terminal raw: C0/C1 controls, DEL, bidi controls, line separators.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
HOSTILE = ("\u202egnp.exe\u202c \x1b[2J\x1b[H \x1b]0;owned\x07 \x9b31m harbour \x1b]8;;http://evil.example\x1b\\link"
           "\x1b]8;;\x1b\\ \r overwritten \x08\x07 \u2028 separated")


def _invoke(ws, *args, input=None, env=None, color=False):
    return CliRunner().invoke(cli, ["-w", str(ws), *args], input=input, env=env, color=color)


def _one_error_line(result, code: int, *needles: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception  # no escaped exception, no traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtier: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _ledger_bytes(ws) -> bytes:
    files = sorted((ws / "memory" / "episodic").rglob("*.jsonl"))
    return b"".join(f.read_bytes() for f in files)


# ---- input -------------------------------------------------------------------------------------------

def test_add_stdin_not_utf8_is_one_line_naming_the_line(tmp_path):
    ws = tmp_path / "ws"
    result = _invoke(ws, "add", "--stdin", input=b"first entry\nsecond \xff\xfe entry\nthird\n")
    _one_error_line(result, 2, "stdin:2", "not UTF-8", "0xff", "the 1 entry before it was written")
    entries = Ledger(ws / "memory").read().entries.values()
    assert [e.content for e in entries] == ["first entry"]  # written before it; nothing after


@pytest.mark.parametrize("line, needle", [
    ('{"content": "x", "timestamp": "not-a-date"}', "timestamp"),
    ('{"content": "x", "timestamp": 1e300}', "timestamp"),
    ('{"content": "x", "timestamp": true}', "timestamp"),
    ('{"content": "x", "session_id": ["a"]}', "session_id"),
    ('{"content": "x", "project": {"a": 1}}', "project"),
    ('{"content": "x", "role": "root"}', "role"),
    ('{"content": "x\\ud800"}', "not valid JSON"),
    ('{"content": 5}', "content"),
    ('{"content": "x"', "not valid JSON"),
])
def test_add_stdin_bad_record_is_one_line(tmp_path, line, needle):
    ws = tmp_path / "ws"
    result = _invoke(ws, "add", "--stdin", input=line + "\n")
    _one_error_line(result, 2, "stdin:1", needle)
    assert _ledger_bytes(ws) == b""


def test_add_text_argument_not_utf8_is_one_line(tmp_path):
    """Bytes in argv that are not UTF-8 (they reach Python as lone surrogates): a real subprocess."""
    proc = subprocess.run([sys.executable, "-m", "memtier_plugin", "-w", str(tmp_path / "ws"), "add", b"caf\xe9"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["memtier: error: TEXT: not UTF-8 text (byte 0xe9 at character 4)"]


# ---- environment: disk full, read-only, permission denied -------------------------------------------

def _failing(real, err: int, ws):
    """``real`` (os.write or os.open) failing with ``err`` for files of the workspace, unchanged elsewhere."""
    def fake(target, *args, **kwargs):
        name = target if isinstance(target, (str, bytes, os.PathLike)) else os.readlink(f"/proc/self/fd/{target}")
        if str(ws) in os.fsdecode(name):
            raise OSError(err, os.strerror(err))
        return real(target, *args, **kwargs)
    return fake


@pytest.mark.parametrize("call, err", [("write", errno.ENOSPC), ("open", errno.EROFS), ("open", errno.EACCES)])
def test_add_when_the_disk_refuses_is_one_line_exit_1(tmp_path, monkeypatch, call, err):
    ws = tmp_path / "ws"
    monkeypatch.setattr(os, call, _failing(getattr(os, call), err, ws))
    result = _invoke(ws, "add", "a note for the ledger")
    line = _one_error_line(result, 1, os.strerror(err), str(ws / "memory" / "episodic"))
    assert "Traceback" not in line
    monkeypatch.undo()
    assert _ledger_bytes(ws) == b""  # nothing half-written


def test_add_into_a_workspace_whose_ledger_folder_is_a_file_is_one_line_exit_1(tmp_path):
    """No patching: memory/episodic exists as a file, so the ledger folder cannot be made (as root too)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "episodic").write_text("not a folder")
    proc = run_cli("-w", str(ws), "add", "a note", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "episodic" in lines[0] and "Not a directory" in lines[0]


# ---- terminal escapes in stored text -----------------------------------------------------------------

@pytest.fixture
def hostile_ws(tmp_path):
    ws = tmp_path / "ws"
    rec = Ledger(ws / "memory", fsync=False).add(agent_id="main", session_id="s\x1b[31m", project="p",
                                                 content=HOSTILE)
    return ws, rec["id"]


@pytest.mark.parametrize("args", [
    ("inspect",), ("inspect", "--history", "--id", "{id}"), ("search", "harbour"),
    ("search", "harbour", "--explain"),
])
def test_human_output_shows_escapes_never_sends_them(hostile_ws, args):
    ws, entry_id = hostile_ws
    before = _ledger_bytes(ws)
    result = _invoke(ws, *[a.format(id=entry_id) for a in args], color=True)  # as on a terminal: nothing stripped
    assert result.exit_code == 0, result.output
    assert RAW_CONTROL.search(result.stdout) is None, repr(RAW_CONTROL.search(result.stdout))
    assert "\\x1b" in result.stdout and "\\u202e" in result.stdout  # shown, visibly
    assert _ledger_bytes(ws) == before  # printing never changes the ledger


@pytest.mark.parametrize("args, pick", [
    (("inspect", "--json"), lambda doc: doc["content"]),
    (("search", "harbour", "--json"), lambda doc: doc["hits"][0]["content"]),
])
def test_json_output_escapes_every_control_and_round_trips(hostile_ws, args, pick):
    ws, _ = hostile_ws
    result = _invoke(ws, *args)
    assert result.exit_code == 0, result.output
    assert RAW_CONTROL.search(result.stdout.strip()) is None
    assert pick(json.loads(result.stdout.splitlines()[0])) == HOSTILE  # the same value, only escaped


def test_error_messages_are_made_printable_too(tmp_path):
    result = _invoke(tmp_path / "ws", "inspect", "--id", "ep-\x1b]0;owned\x07")
    line = _one_error_line(result, 2, "no entry with id")
    assert RAW_CONTROL.search(line) is None


# ---- `memtier --help` imports no numpy -----------------------------------------------------------------

def test_help_imports_no_numpy_and_lists_every_command():
    code = ("import sys, runpy\n"
            "sys.argv = ['memtier', '--help']\n"
            "try:\n    runpy.run_module('memtier_plugin', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
            "heavy = sorted(m for m in ('numpy', 'onnxruntime', 'httpx') if m in sys.modules)\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = re.findall(r"^  (\S+)\s", proc.stdout.split("Commands:")[1], re.M)
    assert listed == sorted(COMMANDS)


def test_help_listing_matches_each_loaded_command():
    """The help read from the sources (without importing) is what the commands themselves say."""
    fresh = MemtierGroup(name=cli.name, params=cli.params, callback=cli.callback, help=cli.help)
    lazy = CliRunner().invoke(fresh, ["--help"]).stdout
    assert not fresh.commands  # listed without loading one
    for name in COMMANDS:
        cli.get_command(None, name)  # import it for real
    loaded = CliRunner().invoke(cli, ["--help"]).stdout
    assert lazy == loaded and all(f"  {name} " in loaded for name in COMMANDS)
