"""flambeau-gpt against the same model written in PyTorch 2.13 (bench/gpt_reference.py):
with the same weights and batch, the loss and every gradient agree; and its command line
(--help lists every option and setting and exits 0, mistakes exit 2 with a message); with
--compile (the blocks compiled, forward and backward) its loss, gradients, training and
samples are the eager ones' bits."""
import os
import re
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpt_reference  # noqa: E402

GPT = os.environ.get("FLAMBEAU_GPT", os.path.join(ROOT, "build", "release", "flambeau-gpt"))


@pytest.mark.parametrize("window", [0, 24])
def test_loss_and_gradients_match_pytorch(tmp_path, window):
    assert os.path.exists(GPT), f"build flambeau-gpt first (cmake --build --preset release): {GPT}"
    out = tmp_path / "grads.safetensors"
    args = ["--n_layer", "2", "--n_head", "4", "--d_model", "64", "--seq_len", "64", "--batch_size", "4",
            "--window", str(window), "--z_loss", "1e-3", "--seed", "5"]
    subprocess.run([GPT, "grads", "--out", str(out), *args], check=True)
    with safe_open(str(out), framework="pt") as f:
        cfg = gpt_reference.parse_config(f.metadata()["config"])
        t = {k: f.get_tensor(k) for k in f.keys()}
    model = gpt_reference.Gpt(cfg)
    model.load_state_dict({k[6:]: v for k, v in t.items() if k.startswith("model.")})
    # Some batches must pack several documents, or the mask is not exercised.
    assert any(len(torch.unique(row)) > 1 for row in t["doc_ids"])
    loss = model.loss(t["inputs"], t["targets"], t["doc_ids"], cfg["z_loss"])
    loss.backward()
    torch.testing.assert_close(loss.detach(), t["loss"], rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        g = t["grad." + name]
        scale = p.grad.abs().max().item()
        torch.testing.assert_close(p.grad, g, rtol=1e-3, atol=1e-4 * scale, msg=lambda m: f"{name}: {m}")


def _settings():
    """The settings' names, read from the one table that defines them (examples/gpt/config.cpp)."""
    with open(os.path.join(ROOT, "examples", "gpt", "config.cpp")) as f:
        names = re.findall(r'\{"(\w+)", &Config::\w+,', f.read())
    assert len(names) > 20
    return names


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_option_and_setting_and_exits_0(flag):
    assert os.path.exists(GPT), f"build flambeau-gpt first (cmake --build --preset release): {GPT}"
    for argv in ([flag], ["train", flag], ["train", "--steps", "3", flag]):
        r = subprocess.run([GPT, *argv], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        for name in ["config", "resume", "checkpoint", "out", "fortunes", "compile", *_settings()]:
            assert any(line.startswith(f"  --{name} ") for line in lines), f"--{name} missing from {flag}"
        # Each setting: --name, its default, a description.
        assert any(re.fullmatch(r"  --steps 900 +\S.*", line) for line in lines)
        assert any(re.fullmatch(r"  --lr 0\.003 +\S.*", line) for line in lines)


@pytest.mark.parametrize("argv, message", [
    (["train", "--no_such_setting", "1"], "unknown option '--no_such_setting'"),
    (["train", "--steps"], "option '--steps' needs a value"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    ([], "no command"),
])
def test_command_line_mistakes_exit_2_with_a_message(argv, message):
    assert os.path.exists(GPT), f"build flambeau-gpt first (cmake --build --preset release): {GPT}"
    r = subprocess.run([GPT, *argv], capture_output=True, text=True)
    assert r.returncode == 2
    assert message in r.stderr and "usage: flambeau-gpt" in r.stderr


SMALL = ["--n_layer", "2", "--n_head", "4", "--d_model", "64", "--seq_len", "64", "--batch_size", "4", "--seed", "5"]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_compiled_loss_and_gradients_are_eagers_bits(tmp_path, dtype):
    """grads --compile dumps the second call, which runs both regions of every block compiled
    (their backward too: CompiledFunctionBackward nodes); eager's bits, as the cpp backend
    replays eager's ops and kernels."""
    assert os.path.exists(GPT), f"build flambeau-gpt first (cmake --build --preset release): {GPT}"
    dumps = {}
    for mode in ("eager", "compile"):
        out = tmp_path / f"{mode}.safetensors"
        flag = ["--compile"] if mode == "compile" else []
        subprocess.run([GPT, "grads", "--out", str(out), *flag, *SMALL, "--window", "24", "--dtype", dtype], check=True,
                       env={**os.environ, "FLAMBEAU_CACHE_DIR": str(tmp_path / "cache")})
        with safe_open(str(out), framework="pt") as f:
            dumps[mode] = (f.metadata()["compiled_backward_nodes"], {k: f.get_tensor(k) for k in f.keys()})
    assert dumps["eager"][0] == "0" and dumps["compile"][0] == "4"  # 2 blocks x 2 regions
    eager, compiled = dumps["eager"][1], dumps["compile"][1]
    assert eager.keys() == compiled.keys()
    for k in eager:
        assert torch.equal(eager[k], compiled[k]), k


def test_compiled_training_and_sampling_are_eagers(tmp_path):
    assert os.path.exists(GPT), f"build flambeau-gpt first (cmake --build --preset release): {GPT}"
    env = {**os.environ, "FLAMBEAU_CACHE_DIR": str(tmp_path / "cache")}
    logs, samples = {}, {}
    for mode in ("eager", "compile"):
        flag = ["--compile"] if mode == "compile" else []
        out = tmp_path / mode
        subprocess.run([GPT, "train", *flag, *SMALL, "--steps", "6", "--warmup", "2", "--eval_every", "3",
                        "--eval_batches", "2", "--out_dir", str(out)], check=True, capture_output=True, env=env)
        # Each line without its speed, which differs from run to run.
        logs[mode] = [re.sub(r'"tokens_per_s":[^,}]+', "", line) for line in (out / "log.jsonl").read_text().splitlines()]
        r = subprocess.run([GPT, "sample", *flag, "--checkpoint", str(out / "ckpt.safetensors"), "--num_samples",
                            "2", "--max_new_tokens", "30"], check=True, capture_output=True, env=env)
        samples[mode] = r.stdout
    assert samples["eager"] == samples["compile"] and samples["eager"].count(b"--- sample") == 2
    assert logs["eager"] == logs["compile"] and len(logs["eager"]) >= 8  # 6 steps, 2 validations
    r = subprocess.run([GPT, "train", "--compile", "--parallel", "ddp", "--steps", "1", "--out_dir",
                        str(tmp_path / "ddp")], capture_output=True, text=True)
    assert r.returncode == 1 and "--compile runs single-process only" in r.stderr
