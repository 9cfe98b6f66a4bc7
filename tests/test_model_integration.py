"""The local model path: weight assembly (always), and a real server (only with MEMTIER_MODEL_URL)."""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile

import pytest

from memtier_plugin.models import setup as model_setup
from memtier_plugin.errors import ModelError
from memtier_plugin.models.chat import ModelClient, ModelConfig
from memtier_plugin.models.setup import ModelSpec

PARTS = [b"GGUF" + bytes(range(256)) * 3, b"middle-part" * 50, b"tail"]


def fake_spec(parts, sha=None):
    blob = b"".join(parts)
    return ModelSpec(filename="tiny.gguf", packages=tuple(f"fake-part{i}" for i in range(1, len(parts) + 1)),
                     version="1.0", size=len(blob), sha256=sha or hashlib.sha256(blob).hexdigest(),
                     model_name="tiny")


def write_wheels(tmp_path, parts):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, data in enumerate(parts, 1):
        name = f"fake_part{i}"
        with zipfile.ZipFile(wheels / f"{name}-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"{name}/__init__.py", "raise SystemExit('never imported')\n")
            zf.writestr(f"{name}/data/part{i:02d}.bin", data)
            zf.writestr(f"{name}-1.0.dist-info/METADATA", "Name: x\n")
            zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    return wheels


def test_assemble_concatenates_in_order_and_verifies(tmp_path):
    spec = fake_spec(PARTS)
    wheels = write_wheels(tmp_path, PARTS)
    lines = []
    out = model_setup.assemble(spec, wheels, tmp_path / "models", echo=lines.append)
    assert out.read_bytes() == b"".join(PARTS)
    assert len(lines) == len(PARTS) + 1 and "verified" in lines[-1]


def test_assemble_refuses_and_deletes_on_hash_mismatch(tmp_path):
    spec = fake_spec(PARTS, sha="0" * 64)
    wheels = write_wheels(tmp_path, PARTS)
    with pytest.raises(ModelError, match="does not verify"):
        model_setup.assemble(spec, wheels, tmp_path / "models", echo=lambda s: None)
    assert list((tmp_path / "models").iterdir()) == []


def test_setup_uses_present_wheels_and_is_idempotent(tmp_path, monkeypatch):
    spec = fake_spec(PARTS)
    monkeypatch.setitem(model_setup.MODELS, "tiny", spec)
    write_wheels(tmp_path, PARTS)  # already "downloaded": no pip call needed
    path = model_setup.setup(tmp_path, "tiny", keep_wheels=False, echo=lambda s: None)
    assert path.read_bytes() == b"".join(PARTS)
    assert list((tmp_path / "wheels").glob("*.whl")) == []
    lines = []
    assert model_setup.setup(tmp_path, "tiny", echo=lines.append) == path
    assert "already present and verified" in lines


def test_missing_wheel_and_unknown_size(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        model_setup.assemble(fake_spec(PARTS), tmp_path, tmp_path / "m", echo=lambda s: None)
    with pytest.raises(ModelError, match="unknown model size"):
        model_setup.spec_for("70b")


def test_serve_reports_a_server_that_cannot_start(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    # Either llama_cpp is not installed or it cannot load this file: the process exits early.
    with pytest.raises(ModelError, match="exited with code"):
        model_setup.serve(bogus, 1, python=sys.executable, ready_timeout_s=60)
    with pytest.raises(ModelError, match="not found"):
        model_setup.serve(tmp_path / "missing.gguf", 1)


MODEL_URL = os.environ.get("MEMTIER_MODEL_URL")

SCHEMA = {
    "type": "object",
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "required": ["attribute", "value"],
                "properties": {"attribute": {"type": "string", "maxLength": 80},
                               "value": {"type": ["string", "number", "boolean"]}},
            },
        }
    },
}


@pytest.mark.model
@pytest.mark.skipif(not MODEL_URL, reason="set MEMTIER_MODEL_URL (e.g. http://127.0.0.1:8080/v1) "
                    "to a running server: `memtier model setup` then `memtier model serve`")
def test_real_model_extracts_json():
    cfg = ModelConfig(base_url=MODEL_URL, api_key_env=os.environ.get("MEMTIER_MODEL_KEY_ENV"),
                      model=os.environ.get("MEMTIER_MODEL_NAME", "qwen2.5-coder-0.5b-instruct"),
                      timeout_s=120, max_tokens=128)
    messages = [
        {"role": "system", "content": 'Extract facts about the user as JSON: '
                                      '{"facts": [{"attribute": "...", "value": "..."}]}'},
        {"role": "user", "content": "I always book aisle seats and my dog is called Pixel."},
    ]
    with ModelClient(cfg) as client:
        res = client.chat(messages, schema=SCHEMA, logprobs=True)
        assert isinstance(res.data["facts"], list)
        assert res.prompt_tokens > 0 and res.completion_tokens > 0
        print(f"\n{res.latency_s:.1f}s {res.data} logprobs={'yes' if res.logprobs else 'no'}")
        lp = client.prompt_logprob(messages, res.text)
        assert lp is None or lp <= 0.0
