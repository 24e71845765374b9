"""rpa.Tokenizer against Hugging Face's GGUF tokenizer loader, on both real models.

The oracle is built the way `transformers` builds a tokenizer from a GGUF file
(transformers.integrations.gguf: `convert_gguf_tokenizer` on the file's `tokenizer.*`
metadata), run by the Rust `tokenizers` library. transformers' own metadata reader needs
torch, so the metadata comes from the PyPI `gguf` package's GGUFReader instead, renamed with
transformers' GGUF_TOKENIZER_MAPPING exactly as its reader would. One override: transformers
does not know SmolLM's pre-tokenizer name "smollm", so the oracle gets the pre-tokenizer of
SmolLM2's own tokenizer.json (each digit alone, then GPT-2's byte-level split).

Compared on a few hundred WikiText-2 test lines and on tricky strings: ids with and without
special-token parsing, decoding, the per-token pieces a streaming printer concatenates, and the
chat prompt against the GGUF's Jinja template. Skips (with the reason) when the models, the
data or the oracle packages are absent.
"""

import json
import os
import tempfile

import pytest

rpa = pytest.importorskip("rpa")
gguf = pytest.importorskip("gguf", reason="PyPI gguf (scripts/install-deps) reads the oracle's metadata")
tokenizers = pytest.importorskip("tokenizers", reason="PyPI tokenizers (scripts/install-deps)")
transformers = pytest.importorskip("transformers", reason="PyPI transformers (scripts/install-deps)")

MODEL_DIR = os.environ.get("RPA_MODEL_DIR") or os.path.expanduser("~/.cache/rpa/models")
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
SHARED = os.environ.get("RPA_SHARED_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared")
WIKITEXT = os.path.join(SHARED, "data", "wikitext-2-raw", "wiki.test.raw")

TRICKY = [
    "",
    " ",
    "Hello world! 123",
    "3.14159 1,000,000 2024-11-29 0x1F 007",
    "x\u00b2 \u2167 \u2460 \u0663\u0664",  # superscript, roman numeral, circled, Arabic-Indic digits
    "a    b",
    "   leading and trailing   ",
    "\t\tx\ty \t z",
    "\n",
    "\n\n\nparagraph\n\n\n\n",
    "windows\r\nline\rends",
    "I'm they'LL don't we've you'd she's",
    "caf\u00e9 na\u00efve e\u0301 \u00a0nbsp\u00a0",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\u4e2d\u6587\u5b57\u7b26",
    "\ud55c\uad6d\uc5b4 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22",
    "emoji \U0001f600\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7",
    "math \u2211\u222b\u221e \u2260 \u2248",
    "next\u0085line and zero\u200bwidth",
    "control \x01\x02\x7f chars",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> <bos><eos><unk><pad> <start_of_turn>model\n<end_of_turn>",
    "<0x41> <0xFF> < | im_start | >",
    "a\u2581b single block",
    "code:\n    def f(x):\n\treturn x  # comment\n",
    "!!!??? ... --- *** ((( )))",
    "ALLCAPS lowercase MiXeD 123abc abc123",
]


def _meta(path):
    r = gguf.GGUFReader(path)
    return {name: f.contents() for name, f in r.fields.items()
            if name.startswith("tokenizer.") or name == "general.architecture"}


def _build_oracle(path):
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer)
    meta = _meta(path)
    tokenizer_dict = {name: meta["tokenizer." + key]
                      for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
                      if "tokenizer." + key in meta}
    tok, _ = convert_gguf_tokenizer(meta["general.architecture"], tokenizer_dict)
    if tokenizer_dict.get("pre_tokenizer_type") == "smollm":
        from tokenizers import pre_tokenizers
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    return tok, meta


def _oracle(path):
    """The oracle tokenizer, cached as JSON: building Gemma's takes ~1 min (merges are
    derived from its 262k-token vocabulary in Python)."""
    st = os.stat(path)
    key = f"{os.path.basename(path)}-{st.st_size}-{int(st.st_mtime)}-" \
          f"{transformers.__version__}-{tokenizers.__version__}"
    cache = os.path.join(tempfile.gettempdir(), "rpa-tokenizer-oracle", key + ".json")
    if os.path.exists(cache):
        with open(cache) as f:
            saved = json.load(f)
        return tokenizers.Tokenizer.from_str(saved["tokenizer"]), saved["meta"]
    tok, meta = _build_oracle(path)
    small_meta = {k: meta[k] for k in ("tokenizer.chat_template",) if k in meta}
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    tmp = cache + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"tokenizer": tok.to_str(), "meta": small_meta}, f)
    os.replace(tmp, cache)
    return tok, small_meta


def _wikitext_lines(n=300):
    if not os.path.exists(WIKITEXT):
        pytest.skip(f"{WIKITEXT} not found")
    with open(WIKITEXT, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    step = max(1, len(lines) // n)
    return lines[::step][:n]


@pytest.fixture(scope="module", params=sorted(MODELS))
def pair(request):
    path = os.path.join(MODEL_DIR, MODELS[request.param])
    if not os.path.exists(path):
        pytest.skip(f"{path} not fetched (scripts/fetch-models)")
    oracle, meta = _oracle(path)
    return request.param, rpa.Tokenizer(path), oracle, meta


def _oracle_ids(oracle, texts, parse_special):
    # tokenizers matches special added tokens in text unless encode_special_tokens is set;
    # user-defined (non-special) added tokens are matched either way, as in rpa.
    oracle.encode_special_tokens = not parse_special
    try:
        return [e.ids for e in oracle.encode_batch(texts, add_special_tokens=False)]
    finally:
        oracle.encode_special_tokens = False


def _mismatches(texts, got, want):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    return [f"{t!r}\n  rpa {g}\n  hf  {w}" for t, g, w in bad[:5]], len(bad)


@pytest.mark.parametrize("parse_special", [False, True])
def test_tricky_strings_match_hf(pair, parse_special):
    name, tok, oracle, _ = pair
    got = tok.encode_batch(TRICKY, add_special=False, parse_special=parse_special)
    want = _oracle_ids(oracle, TRICKY, parse_special)
    shown, n = _mismatches(TRICKY, got, want)
    assert n == 0, f"{name}: {n} of {len(TRICKY)} differ:\n" + "\n".join(shown)


def _random_strings(n=300, seed=1234):
    """Strings drawn from pieces where tokenizers tend to disagree: whitespace runs of each
    kind, contractions, digits, letters of several scripts, emoji, symbols, and fragments of
    special tokens."""
    import random
    pieces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u0085",
              "'s", "'ll", "'", "0", "7", "42", "3.5", "a", "Z", "word", " The", "caf\u00e9",
              "\u65e5\u672c", "\u4e2d", "\ud55c", "\u0639\u0631", "\u0928\u094d", "\u0e44",
              "\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\u0301", "!", "?!", "...", "@",
              "#", "$", "(", ")", "-", "_", "<", ">", "|", "<|im_start|>", "<|im_end|>",
              "<start_of_turn>", "<bos>", "<0x41>", "\x01", "\x7f"]
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(n)]


@pytest.mark.parametrize("parse_special", [False, True])
def test_random_strings_match_hf(pair, parse_special):
    name, tok, oracle, _ = pair
    texts = _random_strings()
    got = tok.encode_batch(texts, add_special=False, parse_special=parse_special)
    want = _oracle_ids(oracle, texts, parse_special)
    shown, n = _mismatches(texts, got, want)
    assert n == 0, f"{name}: {n} of {len(texts)} differ:\n" + "\n".join(shown)


def test_wikitext_lines_match_hf(pair):
    name, tok, oracle, _ = pair
    lines = _wikitext_lines()
    got = tok.encode_batch(lines, add_special=False)
    want = _oracle_ids(oracle, lines, parse_special=False)
    shown, n = _mismatches(lines, got, want)
    assert n == 0, f"{name}: {n} of {len(lines)} WikiText lines differ:\n" + "\n".join(shown)


def test_decode_round_trip_and_pieces(pair):
    name, tok, oracle, _ = pair
    for text in _wikitext_lines() + TRICKY:
        if tok.model == "llama" and "\u2581" in text:
            continue  # SentencePiece spells ' ' as '\u2581', so a literal one decodes as ' '
        ids = tok.encode(text, add_special=False)
        assert tok.decode(ids) == text, (name, text)
        assert oracle.decode(ids, skip_special_tokens=False) == text, (name, text)
        # What a streaming printer concatenates: the raw pieces, bytes exactly.
        assert b"".join(tok.token_piece(i) for i in ids) == text.encode("utf-8"), (name, text)


def test_special_tokens_decode(pair):
    name, tok, oracle, _ = pair
    ids = tok.encode("<bos>x<|im_end|>", add_special=False, parse_special=True)
    assert tok.decode(ids, render_special=True) == oracle.decode(ids, skip_special_tokens=False)
    assert tok.decode(ids) == oracle.decode(ids, skip_special_tokens=True)


def test_bos(pair):
    name, tok, _, _ = pair
    ids = tok.encode("hi", add_special=True)
    if name == "gemma3":
        assert tok.add_bos and ids[0] == tok.bos_id == 2
    else:
        assert not tok.add_bos and ids == tok.encode("hi", add_special=False)


def test_chat_template_matches_jinja(pair):
    name, tok, _, meta = pair
    template = meta.get("tokenizer.chat_template")
    if not template:
        pytest.skip(f"{name} ships no chat template")
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()
    for messages in ([{"role": "user", "content": "What is 2+2?"}],
                     [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello!"},
                      {"role": "user", "content": "Bye"}]):
        for gen in (True, False):
            want = env.from_string(template).render(messages=messages, add_generation_prompt=gen)
            assert tok.apply_chat_template(messages, add_generation_prompt=gen) == want


def test_errors():
    path = os.path.join(MODEL_DIR, MODELS["smollm2"])
    if not os.path.exists(path):
        pytest.skip(f"{path} not fetched")
    tok = rpa.Tokenizer(path)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError):
        rpa.Tokenizer(WIKITEXT)  # not a GGUF file
