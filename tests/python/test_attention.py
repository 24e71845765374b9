"""rpa.ragged_paged_attention against a float64 numpy reference written here.

The reference follows rpa-contract.md §2 literally (write the new K/V, then read the cache
through the page table; GQA head n uses KV head n // G; causal + window; soft cap; sinks
as an extra logit in the denominator; q_scale: q / q_scale clipped to the cache range and
cast to the cache dtype). Unused cache slots and pages hold NaN, so a leak shows.
"""

import threading

import ml_dtypes
import numpy as np
import pytest

import rpa

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def cdiv(a, b):
    return -(-a // b)


def reference(q, k, v, cache, kv_lens, page_indices, cu_q_lens, distribution, *,
              sm_scale=1.0, sliding_window=None, soft_cap=None, sinks=None, q_scale=None,
              k_scale=None, v_scale=None, use_causal_mask=True, update_kv_cache=True):
    """Returns (output float64 [T, Hq, D] with NaN padding rows, expected cache)."""
    cache = cache.copy()
    page_size, num_kv_heads = cache.shape[1], cache.shape[2] // 2
    num_tokens, num_q_heads, head_dim = q.shape
    group = num_q_heads // num_kv_heads
    pages_per_seq = len(page_indices) // len(kv_lens)
    scale = sm_scale * (k_scale or 1.0) * (q_scale or 1.0)
    out = np.full((num_tokens, num_q_heads, head_dim), np.nan)
    for i in range(distribution[2]):
        q0, q1 = cu_q_lens[i], cu_q_lens[i + 1]
        kv_len = kv_lens[i]
        offset = kv_len - (q1 - q0)
        pages = page_indices[i * pages_per_seq:i * pages_per_seq + cdiv(kv_len, page_size)]
        if update_kv_cache:
            for j in range(q1 - q0):
                page, slot = pages[(offset + j) // page_size], (offset + j) % page_size
                cache[page, slot, 0::2] = k[q0 + j]
                cache[page, slot, 1::2] = v[q0 + j]
        seq = cache[pages].reshape(-1, 2 * num_kv_heads, head_dim)[:kv_len].astype(np.float64)
        keys = np.repeat(seq[:, 0::2], group, axis=1)    # [kv_len, Hq, D]: head n -> n // G
        values = np.repeat(seq[:, 1::2], group, axis=1)
        qs = q[q0:q1].astype(np.float32)
        if q_scale is not None:
            limit = float(ml_dtypes.finfo(cache.dtype).max) if cache.dtype != np.float32 else np.inf
            qs = np.clip(qs / np.float32(q_scale), -limit, limit).astype(cache.dtype)
        s = np.einsum("rhd,thd->hrt", qs.astype(np.float64), keys) * scale
        if soft_cap is not None:
            s = soft_cap * np.tanh(s / soft_cap)
        pos = offset + np.arange(q1 - q0)[:, None]
        t = np.arange(kv_len)[None, :]
        visible = np.ones((q1 - q0, kv_len), bool)
        if use_causal_mask:
            visible = t <= pos
            if sliding_window is not None:
                visible &= t > pos - sliding_window
        s = np.where(visible[None], s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        if sinks is not None:
            m = np.maximum(m, sinks.astype(np.float64)[:, None, None])
        p = np.exp(s - m)
        denom = p.sum(axis=-1)
        if sinks is not None:
            denom = denom + np.exp(sinks.astype(np.float64)[:, None] - m[..., 0])
        o = np.einsum("hrt,thd->rhd", p, values) / denom.T[:, :, None]
        out[q0:q1] = o * (v_scale or 1.0)
    return out, cache


def make_batch(rng, seqs, *, num_decode=0, num_prefill=0, q_heads=8, kv_heads=2, head_dim=64,
               page_size=16, q_dtype=BF16, kv_dtype=BF16, update_kv_cache=True, magnitude=1.0,
               extra_tokens=0):
    """Random inputs for sequences [(q_len, kv_len)], pages shuffled, the rest NaN."""
    num_seqs = len(seqs)
    pages_per_seq = max(cdiv(kv, page_size) for _, kv in seqs) + 1
    num_pages = sum(cdiv(kv, page_size) for _, kv in seqs) + 2
    perm = rng.permutation(num_pages).astype(np.int32)
    page_indices = np.full(num_seqs * pages_per_seq, perm[-1], np.int32)  # a NaN page
    used = 0
    for i, (_, kv) in enumerate(seqs):
        n = cdiv(kv, page_size)
        page_indices[i * pages_per_seq:i * pages_per_seq + n] = perm[used:used + n]
        used += n
    cu_q_lens = np.concatenate([[0], np.cumsum([ql for ql, _ in seqs])]).astype(np.int32)
    kv_lens = np.array([kv for _, kv in seqs], np.int32)
    distribution = np.array([num_decode, num_decode + num_prefill, num_seqs], np.int32)
    num_tokens = int(cu_q_lens[-1]) + extra_tokens

    def rand(shape, dtype):
        return (rng.uniform(-1, 1, shape) * magnitude).astype(np.float32).astype(dtype)

    q = rand((num_tokens, q_heads, head_dim), q_dtype)
    k = rand((num_tokens, kv_heads, head_dim), kv_dtype)
    v = rand((num_tokens, kv_heads, head_dim), kv_dtype)
    cache = np.full((num_pages, page_size, 2 * kv_heads, head_dim), np.nan, np.float32)
    cache = cache.astype(kv_dtype)
    for i, (q_len, kv) in enumerate(seqs):
        for pos in range(kv - q_len if update_kv_cache else kv):
            page = page_indices[i * pages_per_seq + pos // page_size]
            cache[page, pos % page_size] = rand((2 * kv_heads, head_dim), kv_dtype)
    return q, k, v, cache, kv_lens, page_indices, cu_q_lens, distribution


def check(args, *, rtol_out, **options):
    """Runs the kernel and the reference; checks the cache to the bit and the output to
    bound = rtol_out * |ref| (one rounding to the output dtype) + the f32 accumulation
    bound that tests/kernels/rpa_cases.cc derives per element, taken here at its worst
    over the batch: max|V| |v_scale| (2 (D + 6) u A + 20 (kv_len + 2) u), with u = 2^-24
    and A the largest |logit| possible, max|q| max|K| D |scale|."""
    q = args[0]
    want, want_cache = reference(*args, **options)
    got, got_cache = rpa.ragged_paged_attention(*args, **options)
    assert got_cache is args[3]
    assert got.dtype == q.dtype and got.shape == q.shape
    assert np.array_equal(got_cache.view(np.uint8), want_cache.view(np.uint8))
    rows = int(args[6][args[7][2]])
    got, want = got[:rows].astype(np.float64), want[:rows]
    assert np.all(np.isfinite(got))
    u, head_dim, max_kv_len = 2.0**-24, q.shape[2], int(np.max(args[4]))
    max_cache = float(np.nanmax(np.abs(want_cache.astype(np.float64))))
    scale = options.get("sm_scale", 1.0) * (options.get("k_scale") or 1.0)
    max_logit = float(np.max(np.abs(q[:rows].astype(np.float64)))) * max_cache * head_dim * scale
    max_v = max_cache * (options.get("v_scale") or 1.0)
    f32_term = max_v * (2 * (head_dim + 6) * u * max_logit + 20 * (max_kv_len + 2) * u)
    bound = rtol_out * np.abs(want) + f32_term
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)
    return got


BF16_ROUNDING = 2.0**-8   # half of bf16's eps 2^-7
F32_ROUNDING = 2.0**-24


def test_bf16_gqa_three_buckets():
    rng = np.random.default_rng(1)
    args = make_batch(rng, [(1, 40), (1, 1), (16, 16), (9, 70), (20, 33)], num_decode=2,
                      num_prefill=1, extra_tokens=3)
    check(args, rtol_out=BF16_ROUNDING, sm_scale=0.125)


@pytest.mark.parametrize("kv_dtype", [E4M3, E5M2])
def test_fp8_cache_with_scales_from_quantize_kv(kv_dtype):
    # The serving path: K/V projections quantized by rpa.quantize_kv with the same scales
    # that the kernel receives; the cache gets exactly those bytes.
    rng = np.random.default_rng(2)
    args = list(make_batch(rng, [(1, 50), (12, 40)], num_decode=1, kv_dtype=kv_dtype))
    k_raw = rng.uniform(-300, 300, args[1].shape).astype(np.float32).astype(BF16)
    v_raw = rng.uniform(-300, 300, args[2].shape).astype(np.float32).astype(BF16)
    args[1], args[2] = rpa.quantize_kv(kv_dtype, k_raw, v_raw, k_scale=0.5, v_scale=0.25)
    assert args[1].dtype == kv_dtype
    check(tuple(args), rtol_out=BF16_ROUNDING, sm_scale=0.01, k_scale=0.5, v_scale=0.25)


def test_q_scale_clips_to_the_cache_range():
    rng = np.random.default_rng(3)
    args = make_batch(rng, [(1, 20), (5, 30)], num_decode=1, kv_dtype=E4M3, magnitude=300.0)
    check(args, rtol_out=BF16_ROUNDING, sm_scale=0.001, q_scale=0.5, k_scale=0.1, v_scale=2.0)


def test_f32_window_soft_cap_sinks():
    rng = np.random.default_rng(4)
    args = make_batch(rng, [(1, 100), (30, 90), (7, 7)], num_decode=1, q_heads=6, kv_heads=3,
                      head_dim=80, page_size=8, q_dtype=np.float32, kv_dtype=np.float32,
                      magnitude=3.0)
    sinks = rng.uniform(-3, 3, 6).astype(np.float32)
    check(args, rtol_out=F32_ROUNDING, sm_scale=0.1, sliding_window=13, soft_cap=4.0,
          sinks=sinks)


def test_non_causal():
    rng = np.random.default_rng(5)
    args = make_batch(rng, [(10, 10), (4, 20)], q_heads=4, kv_heads=4)
    check(args, rtol_out=BF16_ROUNDING, sm_scale=0.125, use_causal_mask=False)


def test_kv_share_reads_the_cache_and_ignores_new_kv():
    rng = np.random.default_rng(6)
    args = make_batch(rng, [(1, 33), (16, 16), (8, 24)], num_decode=1, num_prefill=1,
                      q_heads=8, kv_heads=1, head_dim=128, update_kv_cache=False)
    before = args[3].copy()
    first = check(args, rtol_out=BF16_ROUNDING, sm_scale=0.088, update_kv_cache=False)
    assert np.array_equal(args[3].view(np.uint8), before.view(np.uint8))
    other = list(args)
    other[1] = np.zeros_like(args[1])
    other[2] = np.full_like(args[2], 7)
    second, _ = rpa.ragged_paged_attention(*other, sm_scale=0.088, update_kv_cache=False)
    assert np.array_equal(first, second[:first.shape[0]].astype(np.float64))
    assert np.any(first != 0)


def test_read_only_cache_is_fine_in_kv_share_mode_only():
    rng = np.random.default_rng(7)
    args = make_batch(rng, [(2, 5)], update_kv_cache=False)
    args[3].setflags(write=False)
    rpa.ragged_paged_attention(*args, update_kv_cache=False)
    with pytest.raises(ValueError, match="writeable"):
        rpa.ragged_paged_attention(*args)


def test_releases_the_gil():
    # Two threads calling at once both finish with the right answer (the kernel runs
    # without the GIL; a deadlock or a shared-state race would show here).
    rng = np.random.default_rng(8)
    batches = [make_batch(rng, [(1, 3000), (4, 2000)], num_decode=1) for _ in range(2)]
    results = [None, None]

    def run(i):
        results[i] = rpa.ragged_paged_attention(*batches[i], sm_scale=0.125)[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        want, _ = reference(*batches[i], sm_scale=0.125)
        got = results[i][:5].astype(np.float64)
        assert np.allclose(got, want[:5], rtol=2 * BF16_ROUNDING, atol=1e-3)


# ---- Errors: ValueError with the contract's messages (§3) ----

def small_batch(**kw):
    return list(make_batch(np.random.default_rng(9), [(1, 5), (3, 20)], num_decode=1, **kw))


def test_fp8_cache_with_bf16_kv_is_the_dtype_error():
    args = small_batch()
    args[3] = args[3].astype(np.float32).astype(E4M3)
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*args)
    assert str(e.value) == ("Expected kv_cache.dtype=float8_e4m3fn to be equal to "
                            "k.dtype=bfloat16 and v.dtype=bfloat16.")


def test_integer_cache_is_not_floating_point():
    args = small_batch()
    args[1] = np.zeros(args[1].shape, np.int8)
    args[2] = np.zeros(args[2].shape, np.int8)
    args[3] = np.zeros(args[3].shape, np.int8)
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*args)
    assert str(e.value) == "Expected kv_cache.dtype=int8 to be a floating point."


def test_metadata_must_be_int32():
    args = small_batch()
    args[4] = args[4].astype(np.int64)
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*args)
    assert str(e.value) == ("Expected int32 dtype for kv_lens.dtype=int64, "
                            "page_indices.dtype=int32, cu_q_lens.dtype=int32, "
                            "distribution.dtype=int32")


def test_metadata_must_be_1d():
    args = small_batch()
    args[5] = args[5].reshape(2, -1)
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*args)
    assert str(e.value) == ("Expected 1D array for kv_lens.shape=(2,), "
                            "page_indices.shape=(2, 3), cu_q_lens.shape=(3,)")


@pytest.mark.parametrize("options, message", [
    ({"sliding_window": 0}, "sliding_window=0 must be positive."),
    ({"sliding_window": -1}, "sliding_window=-1 must be positive."),
    ({"soft_cap": 0.0}, "soft_cap=0.0 must not be 0.0."),
    ({"sinks": np.zeros(3, np.float32)},
     "Expected attention_sink.shape[0]=3 to be equal to q.shape[1]=8 (num_q_heads)."),
    ({"sinks": np.zeros(8, np.float64)},
     "Expected attention_sink.shape[0]=8 to be equal to q.shape[1]=8 (num_q_heads)."),
])
def test_option_errors(options, message):
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*small_batch(), **options)
    assert str(e.value) == message


def test_shape_and_metadata_value_errors():
    args = small_batch()
    bad = list(args)
    bad[1] = args[1][:, :1]  # k has 1 kv head, v has 2
    with pytest.raises(ValueError, match=r"^Expected k.shape=\(4, 1, 64\) to be equal to "
                                         r"v.shape=\(4, 2, 64\)$"):
        rpa.ragged_paged_attention(*bad)
    bad = list(args)
    bad[4] = np.array([5, 2], np.int32)  # q_len 3 > kv_len 2
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*bad)
    assert str(e.value) == "Require 0 < q_len=3 <= kv_len=2 at sequence 1."
    bad = list(args)
    bad[7] = np.array([0, 0, 3], np.int32)
    with pytest.raises(ValueError) as e:
        rpa.ragged_paged_attention(*bad)
    assert str(e.value) == "num_seqs=3 must be <= max_num_seqs=2"
    cache_before = args[3].copy()
    assert np.array_equal(args[3].view(np.uint8), cache_before.view(np.uint8))
