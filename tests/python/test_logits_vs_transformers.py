"""rpa's logits for the two real models against an independent implementation.

The reference is PyPI `transformers` (+ CPU `torch`) loading the same GGUF file with its
own loader (`from_pretrained(dir, gguf_file=...)`): its own dequantization (the `gguf`
package's numpy code), its own un-permutation of SmolLM2's Q/K rows (it then uses NEOX
RoPE where rpa uses adjacent pairs on the permuted rows), its own Gemma 3 (norm weights
stored as w - 1 and applied as 1 + w, sliding-window masks, dual RoPE bases). rpa runs
through `rpa_logits` (tests/model/rpa_logits.cc): LoadModel -> Engine -> Decoder -> paged
KV cache (f32) -> attention kernel, one greedy request of N tokens per prompt.

What is compared, per prompt, at the prompt's last position and at each of the N-1
positions after it (teacher-forced on rpa's own greedy tokens, so the contexts are equal
even if a near-tie made the greedy paths differ):

  truth  transformers in float64, with RoPE's angles and cos/sin also in float64 (HF
         computes them in f32 even for an f64 model; rpa computes them in double, so
         HF's f32 angles would otherwise count as rpa's error). What remains f32 in it —
         Gemma's RMSNorm (HF casts to f32 inside) — rounds at 2^-24 relative, far below
         the f32 matmul noise measured below.
  hf32   transformers in float32: one correct f32 evaluation of the same model.
  rpa    rpa in float32.

Derived tolerance. Both implementations multiply bit-identical weights (rpa's dequantizer
matches the `gguf` package's bit for bit: tests/model/gguf_oracle_test; the only weight
difference is Gemma's norms, fl(fl(w - 1) + 1), which is exact for w >= 0.5 and within
2^-25 absolute otherwise). So the only differences are f32 rounding — accumulation order
in the matmuls (length 576..2048), the online softmax of the paged kernel versus a
materialized one, exp/tanh implementations — amplified through 30 (18) layers. Bounding
that amplification a priori is hopeless (it depends on the weights), so it is measured:
the distance from hf32 to the truth, e_hf = max |hf32 - truth|, is the size of "f32
noise" for this model and prompt. rpa is another f32 evaluation of the same formulas, with
the same per-operation error bounds (gamma_n = n u for any summation order), so its
distance to the truth must be of the same order:

  max |rpa - truth| <= NOISE_FACTOR * e_hf + 1e-4

NOISE_FACTOR = 4 allows for the realized error of two different summation orders to
differ by a few times (their bounds are equal; what they realize fluctuates); the 1e-4
floor (about 1e-5 of the logits' range) only matters if HF's f32 happens to match its f64
almost exactly. A wrong RoPE pairing, norm offset, window, scale or weight role moves
logits by O(1), five orders of magnitude above this.

Top-1: at every compared position where the truth's top-2 margin exceeds twice the
tolerance, rpa's argmax (= its greedy token) equals the truth's. Greedy: transformers'
own f32 greedy continuation of N tokens equals rpa's (a divergence is accepted only at a
position whose truth margin is within twice the tolerance: a genuine tie at f32 noise).

Skips cleanly when the models (scripts/fetch-models), torch/transformers/accelerate, or
the rpa_logits program (RPA_LOGITS_BIN, set by ctest's model_logits_vs_transformers) are
missing. transformers' GGUF loading takes minutes (its GGUF reader is slow on the 262k
token vocabularies), so the converted reference is cached once as safetensors under
${RPA_HF_CACHE:-~/.cache/rpa/hf}/<model> (f32: 0.5 and 1.1 GB).
"""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyPI torch (CPU) is not installed")
transformers = pytest.importorskip("transformers", reason="PyPI transformers is not installed")
safetensors = pytest.importorskip("safetensors")
pytest.importorskip("safetensors.torch")
pytest.importorskip("accelerate", reason="PyPI accelerate (transformers' GGUF loading) is not installed")

N_GENERATE = 32
NOISE_FACTOR = 4.0
FLOOR = 1e-4

MODEL_DIR = pathlib.Path(os.environ.get("RPA_MODEL_DIR") or pathlib.Path.home() / ".cache/rpa/models")
HF_CACHE = pathlib.Path(os.environ.get("RPA_HF_CACHE") or pathlib.Path.home() / ".cache/rpa/hf")
SHARED = pathlib.Path(os.environ.get("RPA_SHARED_DIR") or pathlib.Path(__file__).resolve().parents[3] / "shared")

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

FALLBACK_TEXT = (
    "The tower is 324 metres (1,063 ft) tall, about the same height as an 81-storey "
    "building, and the tallest structure in Paris. Its base is square, measuring 125 metres "
    "(410 ft) on each side. During its construction, the Eiffel Tower surpassed the "
    "Washington Monument to become the tallest man-made structure in the world."
)


def wikitext(n_chars):
    path = SHARED / "data/wikitext-2-raw/wiki.test.raw"
    text = path.read_text(encoding="utf-8") if path.exists() else FALLBACK_TEXT * 40
    start = text.find(" = Robert Boulter = ")
    return text[max(start, 0):][:n_chars]


def hf_reference(name):
    """transformers' model and tokenizer for MODELS[name], converted from the GGUF once."""
    gguf = MODEL_DIR / MODELS[name]
    if not gguf.exists():
        pytest.skip(f"{gguf} not fetched (scripts/fetch-models)")
    cache = HF_CACHE / gguf.stem
    if not (cache / "config.json").exists():
        model = transformers.AutoModelForCausalLM.from_pretrained(
            MODEL_DIR, gguf_file=gguf.name, dtype=torch.float32)
        tok = transformers.AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=gguf.name)
        HF_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(dir=HF_CACHE))
        # save_pretrained refuses a model loaded from GGUF; its weights are plain f32 now,
        # so save them as such (save_model keeps one copy of the tied embedding).
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.save_pretrained(tmp)
        safetensors.torch.save_model(model, str(tmp / "model.safetensors"))
        tok.save_pretrained(tmp)
        shutil.rmtree(cache, ignore_errors=True)
        os.replace(tmp, cache)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        cache, dtype=torch.float32, attn_implementation="eager")
    tok = transformers.AutoTokenizer.from_pretrained(cache)
    return model.eval(), tok


def exact_rope(model):
    """Replaces the model's RoPE tables with float64 ones (angles and cos/sin)."""
    cfg = model.config
    rotary = model.model.rotary_emb
    dim = cfg.head_dim
    half = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    params = cfg.rope_parameters
    if "rope_theta" in params:  # one set for every layer (llama)
        params = {None: params}
    inv_freq = {}
    for layer_type, p in params.items():
        assert p.get("rope_type", "default") == "default", p
        inv_freq[layer_type] = 1.0 / (float(p["rope_theta"]) ** half)

    def forward(x, position_ids, layer_type=None):
        freqs = position_ids[..., None].to(torch.float64) * inv_freq[layer_type]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    rotary.forward = forward


def prompts_for(name, tok):
    texts = ["The capital of France is", wikitext(700)]
    ids = [tok(t)["input_ids"] for t in texts]
    if name == "smollm2":  # the instruct model's ChatML
        ids.append(tok.apply_chat_template(
            [{"role": "user", "content": "What is the tallest mountain in Europe?"}],
            add_generation_prompt=True, tokenize=True, return_dict=False))
    else:  # past Gemma's 512-token window: the local layers must drop the oldest keys
        ids.append(tok(wikitext(4000))["input_ids"][:600])
    return [list(map(int, p)) for p in ids]


def rpa_logits_binary():
    binary = os.environ.get("RPA_LOGITS_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("RPA_LOGITS_BIN is not set (ctest -R model_logits_vs_transformers sets it)")
    return binary


def run_rpa(name, prompts, tmp_path):
    binary = rpa_logits_binary()
    prompts_file = tmp_path / "prompts.txt"
    prompts_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    out = subprocess.run(
        [binary, str(MODEL_DIR / MODELS[name]), str(prompts_file), str(tmp_path),
         "--kv-cache-dtype", "auto", "--generate", str(N_GENERATE)],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    timings = json.loads(out.stdout.strip().splitlines()[-1])
    results = []
    for i in range(len(prompts)):
        logits = np.fromfile(tmp_path / f"logits_{i}.f32", dtype=np.float32).reshape(N_GENERATE, -1)
        tokens = [int(t) for t in (tmp_path / f"tokens_{i}.txt").read_text().split()]
        results.append((logits, tokens))
    return results, timings


@torch.no_grad()
def teacher_forced_logits(model, prompt, generated):
    """Logits at the prompt's last position and after each of generated[:-1]."""
    ids = torch.tensor([prompt + generated[:-1]])
    # Only the compared positions go through the lm_head (262k rows for Gemma).
    logits = model(ids, logits_to_keep=len(generated)).logits[0]
    return logits.to(torch.float64).numpy()


@torch.no_grad()
def hf_greedy(model, prompt, n):
    out = model(torch.tensor([prompt]), use_cache=True)
    tokens = []
    for _ in range(n):
        tokens.append(int(out.logits[0, -1].argmax()))
        out = model(torch.tensor([[tokens[-1]]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens


def top2_margin(row):
    top = np.partition(row, -2)[-2:]
    return float(top[1] - top[0])


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_match_transformers(name, tmp_path):
    rpa_logits_binary()
    torch.set_num_threads(2)
    model32, tok = hf_reference(name)
    prompts = prompts_for(name, tok)
    rpa_results, timings = run_rpa(name, prompts, tmp_path)
    model64 = transformers.AutoModelForCausalLM.from_pretrained(
        HF_CACHE / MODELS[name][:-len(".gguf")], dtype=torch.float64,
        attn_implementation="eager").eval()
    exact_rope(model64)

    report = [f"{name}: load {timings['load_s']:.2f} s"]
    for i, (prompt, (rpa_logits, rpa_tokens)) in enumerate(zip(prompts, rpa_results)):
        truth = teacher_forced_logits(model64, prompt, rpa_tokens)
        hf32 = teacher_forced_logits(model32, prompt, rpa_tokens)
        assert truth.shape == rpa_logits.shape
        e_hf = float(np.abs(hf32 - truth).max())
        e_rpa = float(np.abs(rpa_logits - truth).max())
        tol = NOISE_FACTOR * e_hf + FLOOR
        margins = np.array([top2_margin(r) for r in truth])
        decided = margins > 2 * tol
        agree = rpa_logits.argmax(-1) == truth.argmax(-1)
        greedy = hf_greedy(model32, prompt, N_GENERATE)
        t = timings["prompts"][i]
        report.append(
            f"  prompt {i} ({len(prompt)} tokens): max|rpa-truth| {e_rpa:.2e}, "
            f"max|hf32-truth| {e_hf:.2e}, ratio {e_rpa / max(e_hf, 1e-30):.2f}, "
            f"top-1 {agree.sum()}/{len(agree)}, greedy {'equal' if greedy == rpa_tokens else 'DIFFERENT'}; "
            f"prefill {t['prefill_ms']:.0f} ms, decode {t['decode_ms_median']:.1f} ms/token")
        print(report[-1])
        assert e_rpa <= tol, "\n".join(report)
        assert agree[decided].all(), (
            f"prompt {i}: top-1 differs at decided positions {np.flatnonzero(decided & ~agree)}")
        if greedy != rpa_tokens:
            j = next(k for k, (a, b) in enumerate(zip(greedy, rpa_tokens)) if a != b)
            assert not decided[j], (
                f"prompt {i}: greedy continuations differ at token {j} (transformers "
                f"{greedy[j]}, rpa {rpa_tokens[j]}) where the truth's top-2 margin "
                f"{margins[j]:.3g} exceeds 2 x tolerance {2 * tol:.3g}")
    print("\n".join(report))
