"""The serving attention path (issue 4) through the Python bindings: rpa.Attention over
each KV cache dtype, with a recording backend (what reaches the kernel) and with the real
kernel (what lands in the cache). References are numpy / ml_dtypes, not rpa."""

import re

import ml_dtypes
import numpy as np
import pytest

import rpa

FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
D_MODEL, HQ, HKV, D = 48, 4, 2, 16
SEQS = [(1, 9), (5, 5), (3, 11)]  # (q_len, kv_len): decode, prefill, mixed
PAGE_SIZE = 4


class Batch:
    """Ragged metadata for SEQS with pages handed out in a scrambled order."""

    def __init__(self, seqs=SEQS, page_size=PAGE_SIZE):
        self.seqs, self.ps = seqs, page_size
        self.pps = max(-(-kv // page_size) for _, kv in seqs)
        self.num_pages = len(seqs) * self.pps + 3
        if self.num_pages % 7 == 0:
            self.num_pages += 1
        self.page_indices = ((7 * np.arange(len(seqs) * self.pps) + 2) % self.num_pages).astype(np.int32)
        self.kv_lens = np.array([kv for _, kv in seqs], np.int32)
        self.cu_q_lens = np.concatenate([[0], np.cumsum([q for q, _ in seqs])]).astype(np.int32)
        # Leading decode-only (q_len 1), then prefill-only (q_len == kv_len), then mixed.
        d0 = d1 = 0
        for i, (q, kv) in enumerate(seqs):
            if q == 1 and d0 == i:
                d0 = d1 = i + 1
            elif q == kv and d1 == i:
                d1 = i + 1
        self.distribution = np.array([d0, d1, len(seqs)], np.int32)
        self.positions = np.concatenate(
            [np.arange(kv - q, kv) for q, kv in seqs]).astype(np.int32)
        self.t = int(self.cu_q_lens[-1])

    def metadata(self):
        return self.kv_lens, self.page_indices, self.cu_q_lens, self.distribution

    def new_slots(self):
        """(page, slot) of every new token, in row order."""
        out = []
        for i, (q, kv) in enumerate(self.seqs):
            for pos in range(kv - q, kv):
                out.append((self.page_indices[i * self.pps + pos // self.ps], pos % self.ps))
        return out

    def cache(self, dtype, fill=np.nan, k_mult=1.0, v_mult=1.0):
        """A cache whose unused slots hold `fill` and whose context before this step holds
        multiples of 1/4 in [-2, 2] (exact in every cache dtype) times k_mult / v_mult."""
        c = np.full((self.num_pages, self.ps, 2 * HKV, D), fill, np.float32)
        rng = np.random.default_rng(99)
        for i, (q, kv) in enumerate(self.seqs):
            for pos in range(kv - q):
                page, slot = self.page_indices[i * self.pps + pos // self.ps], pos % self.ps
                c[page, slot] = rng.integers(-8, 9, (2 * HKV, D)) * 0.25
                c[page, slot, 0::2] *= np.float32(k_mult)
                c[page, slot, 1::2] *= np.float32(v_mult)
        return c.astype(dtype)


def weights(seed, scale=1.0, qk_norm=True):
    rng = np.random.default_rng(seed)
    u = lambda shape, s: (rng.uniform(-1, 1, shape) * s).astype(np.float32)
    w = dict(wq=u((HQ * D, D_MODEL), scale / np.sqrt(D_MODEL)),
             wk=u((HKV * D, D_MODEL), scale / np.sqrt(D_MODEL)),
             wv=u((HKV * D, D_MODEL), scale / np.sqrt(D_MODEL)),
             wo=u((D_MODEL, HQ * D), 1 / np.sqrt(HQ * D)))
    if qk_norm:
        w["q_norm"] = 1 + u((D,), 0.5)
        w["k_norm"] = 1 + u((D,), 0.5)
    return w


def layer(seed, act="float32", backend=None, scale=1.0, qk_norm=True, **kw):
    w = weights(seed, scale, qk_norm)
    return rpa.Attention(w.pop("wq"), w.pop("wk"), w.pop("wv"), w.pop("wo"), num_q_heads=HQ,
                         num_kv_heads=HKV, head_dim=D, activation_dtype=act, backend=backend,
                         **w, **kw)


def hidden(t, act, seed):
    x = np.random.default_rng(seed).uniform(-1, 1, (t, D_MODEL)).astype(np.float32)
    return x.astype(ml_dtypes.bfloat16) if act == "bfloat16" else x


class Recorder:
    """A backend that records what the layer hands to the kernel; forwards to the real
    kernel binding when `batch` is given, else writes zeros."""

    def __init__(self, batch=None):
        self.calls, self.batch = [], batch

    def __call__(self, q, k, v, kv_cache, options, out):
        self.calls.append(dict(q=q.copy(), k=k.copy(), v=v.copy(), cache_dtype=kv_cache.dtype,
                               **{n: options[n] for n in options if n != "sinks"}))
        if self.batch is None:
            out[...] = 0
            return
        kernel_opts = {n: options[n] for n in ("sm_scale", "sliding_window", "soft_cap", "sinks",
                                               "q_scale", "k_scale", "v_scale",
                                               "use_causal_mask", "update_kv_cache")}
        o, _ = rpa.ragged_paged_attention(q, k, v, kv_cache, *self.batch.metadata(), **kernel_opts)
        out[...] = o


def reference_quantize(x, dtype_name, scale):
    """contract §4 with ml_dtypes: cast(clip(x / scale, -max, max)), division in f32."""
    fmax = float(ml_dtypes.finfo(FP8[dtype_name]).max)
    y = x.astype(np.float32) / np.float32(scale)
    return np.clip(y, -fmax, fmax).astype(FP8[dtype_name])


def as_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8)


# Tests 1 and 2.
@pytest.mark.parametrize("kv_string,act", [("fp8", "float32"), ("fp8_e4m3", "bfloat16"),
                                           ("fp8_e5m2", "float32"), ("fp8_e5m2", "bfloat16")])
@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.0371, 2.5)])
def test_fp8_cache_gets_quantized_kv_and_scales(kv_string, act, scales):
    cache_dtype = rpa.kv_cache_dtype(kv_string, act)
    b, rec = Batch(), Recorder()
    lay = layer(1, act, rec)
    x = hidden(b.t, act, 2)
    lay.forward_serve(x, b.positions, *b.metadata(), b.cache(FP8[cache_dtype]),
                      k_scale=scales[0], v_scale=scales[1])
    assert len(rec.calls) == 1
    call = rec.calls[0]
    _, k, v = lay.project_qkv(x, b.positions)
    assert call["cache_dtype"].name == call["k"].dtype.name == call["v"].dtype.name == cache_dtype
    assert call["q"].dtype.name == act
    np.testing.assert_array_equal(as_bytes(call["k"]), as_bytes(reference_quantize(k, cache_dtype, scales[0])))
    np.testing.assert_array_equal(as_bytes(call["v"]), as_bytes(reference_quantize(v, cache_dtype, scales[1])))
    k_rpa, v_rpa = rpa.quantize_kv(cache_dtype, k, v, *scales)
    np.testing.assert_array_equal(as_bytes(call["k"]), as_bytes(k_rpa))
    np.testing.assert_array_equal(as_bytes(call["v"]), as_bytes(v_rpa))
    assert call["k_scale"] == np.float32(scales[0]) and call["v_scale"] == np.float32(scales[1])
    assert call["q_scale"] is None
    assert call["update_kv_cache"] is True


# Test 3: K/V unchanged and scales unset; with the real kernel the output equals the path
# assembled without the K/V step (project_qkv -> kernel with no scales), bit for bit.
@pytest.mark.parametrize("kv_string,act", [("bfloat16", "bfloat16"), ("auto", "bfloat16"),
                                           ("auto", "float32")])
def test_non_fp8_cache_is_unchanged(kv_string, act):
    cache_dtype = np.dtype(ml_dtypes.bfloat16) if rpa.kv_cache_dtype(kv_string, act) == "bfloat16" \
        else np.dtype(np.float32)
    b = Batch()
    x = hidden(b.t, act, 4)
    rec = Recorder(b)
    lay = layer(3, act, rec)
    cache_a, cache_b = b.cache(cache_dtype), b.cache(cache_dtype)
    lay.forward_serve(x, b.positions, *b.metadata(), cache_a)
    call = rec.calls[0]
    q, k, v = lay.project_qkv(x, b.positions)
    np.testing.assert_array_equal(as_bytes(call["k"]), as_bytes(k))
    np.testing.assert_array_equal(as_bytes(call["v"]), as_bytes(v))
    assert call["k_scale"] is None and call["v_scale"] is None and call["q_scale"] is None

    plain, _ = rpa.ragged_paged_attention(q, k, v, cache_b, *b.metadata(), sm_scale=1 / np.sqrt(D))
    served = Recorder(b)
    out_served = layer(3, act, served).forward_serve(x, b.positions, *b.metadata(), b.cache(cache_dtype))
    out_kernel = layer(3, act).forward_serve(x, b.positions, *b.metadata(), b.cache(cache_dtype))
    np.testing.assert_array_equal(as_bytes(cache_a), as_bytes(cache_b))
    np.testing.assert_array_equal(as_bytes(out_served), as_bytes(out_kernel))
    # The attention the layer dispatched equals the plain path's, bit for bit.
    rec_out = Recorder(b)
    attn = {}

    def capture(q_, k_, v_, c_, o_, out):
        rec_out(q_, k_, v_, c_, o_, out)
        attn["out"] = out.copy()

    layer(3, act, capture).forward_serve(x, b.positions, *b.metadata(), b.cache(cache_dtype))
    np.testing.assert_array_equal(as_bytes(attn["out"]), as_bytes(plain))
    assert np.isfinite(out_kernel.astype(np.float32)).all()


# Test 4: beyond the format's range -> exactly +-max in the cache, no NaN/Inf.
@pytest.mark.parametrize("cache_dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_out_of_range_saturates_to_format_max(cache_dtype):
    fmax = float(ml_dtypes.finfo(FP8[cache_dtype]).max)
    b = Batch()
    lay = layer(5, "float32", scale=8 * fmax, qk_norm=False)
    x = hidden(b.t, "float32", 6)
    cache = b.cache(FP8[cache_dtype], fill=0)
    lay.forward_serve(x, b.positions, *b.metadata(), cache)
    _, k, v = lay.project_qkv(x, b.positions)
    assert max(np.abs(k).max(), np.abs(v).max()) > fmax
    stored = np.stack([cache[p, s] for p, s in b.new_slots()]).astype(np.float32)
    assert np.isfinite(stored).all()
    assert np.abs(stored).max() == fmax


# Test 5: a KV-shared layer reads its donor's fp8 cache, passes update_kv_cache=False, and
# leaves the donor's bytes unchanged.
@pytest.mark.parametrize("cache_dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_kv_shared_layer_does_not_write(cache_dtype):
    b = Batch()
    x = hidden(b.t, "bfloat16", 8)
    cache = b.cache(FP8[cache_dtype])
    layer(7, "bfloat16").forward_serve(x, b.positions, *b.metadata(), cache, k_scale=0.5, v_scale=2)
    after_donor = cache.copy()
    rec = Recorder(b)
    out = layer(9, "bfloat16", rec, kv_share_donor=0).forward_serve(
        x, b.positions, *b.metadata(), cache, k_scale=0.5, v_scale=2)
    assert rec.calls[0]["update_kv_cache"] is False
    assert rec.calls[0]["k"].dtype.name == cache_dtype
    np.testing.assert_array_equal(as_bytes(cache), as_bytes(after_donor))
    assert np.isfinite(out.astype(np.float32)).all()


# Test 6: the negative control -- the kernel refuses bf16 K/V over an fp8 cache.
def test_kernel_rejects_bf16_kv_over_fp8_cache():
    b = Batch()
    q = np.zeros((b.t, HQ, D), ml_dtypes.bfloat16)
    k = np.zeros((b.t, HKV, D), ml_dtypes.bfloat16)
    cache = b.cache(ml_dtypes.float8_e4m3fn, fill=0)
    msg = ("Expected kv_cache.dtype=float8_e4m3fn to be equal to k.dtype=bfloat16 and "
           "v.dtype=bfloat16.")
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        rpa.ragged_paged_attention(q, k, k.copy(), cache, *b.metadata())


# Test 7: end to end against an f32 cache; new slots hold exactly the quantized bytes, and
# the output is within the worst-case bound derived in
# tests/layers/test_serving_path_kernel.cc (EndToEndCloseToF32CacheWithinDerivedBound):
#   |dy_j| <= sum_i |wo_ji| (B_i + 2 (1e-5 + HqD 2^-24) V_i),
#   B = expm1(2E)(1 + u)V + uV + s_v delta,  E = sm max_t sum_x |q_x| (u|k_tx| + s_k delta),
# u = eps/2, delta = smallest subnormal / 2, V = max_t |v_t| per element.
@pytest.mark.parametrize("cache_dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_end_to_end_close_to_f32_cache(cache_dtype):
    fi = ml_dtypes.finfo(FP8[cache_dtype])
    u, delta = float(fi.eps) / 2, float(fi.smallest_subnormal) / 2
    ks, vs = 6.0 / float(fi.max), 1.5 / float(fi.max)
    sm = 0.1
    b = Batch([(5, 5), (7, 7)])  # all context is new: both caches see the same K/V
    x = hidden(b.t, "float32", 11)
    c8, c32 = b.cache(FP8[cache_dtype]), b.cache(np.float32)
    y8 = layer(10, sm_scale=sm).forward_serve(x, b.positions, *b.metadata(), c8, k_scale=ks, v_scale=vs)
    y32 = layer(10, sm_scale=sm).forward_serve(x, b.positions, *b.metadata(), c32)
    q, k, v = layer(10, sm_scale=sm).project_qkv(x, b.positions)
    assert np.abs(k).max() / ks < fi.max and np.abs(v).max() / vs < fi.max  # no clipping

    kq, vq = reference_quantize(k, cache_dtype, ks), reference_quantize(v, cache_dtype, vs)
    for row, (p, s) in enumerate(b.new_slots()):
        np.testing.assert_array_equal(as_bytes(c8[p, s, 0::2]), as_bytes(kq[row]))
        np.testing.assert_array_equal(as_bytes(c8[p, s, 1::2]), as_bytes(vq[row]))

    wo = np.abs(weights(10)["wo"].astype(np.float64))  # [d_model, Hq*D]
    g = HQ // HKV
    for i, (ql, _) in enumerate(b.seqs):
        rows = slice(b.cu_q_lens[i], b.cu_q_lens[i + 1])
        qs, kk, vv = np.abs(q[rows]), np.abs(k[rows]), np.abs(v[rows])  # [L, H, D]
        kv_head = np.arange(HQ) // g
        # e[r, n, t] = sm sum_x |q_rnx| (u |k_t,h(n),x| + s_k delta)
        e = sm * np.einsum("rnx,tnx->rnt", qs, u * kk[:, kv_head] + ks * delta)
        big_e = e.max(axis=2)                                   # [L, Hq]
        vmax = vv.max(axis=0)[kv_head]                          # [Hq, D]
        bnd = np.expm1(2 * big_e)[:, :, None] * (1 + u) * vmax + u * vmax + vs * delta
        bnd = bnd + 2 * (1e-5 + HQ * D * 2.0 ** -24) * vmax     # [L, Hq, D]
        bound = bnd.reshape(ql, -1) @ wo.T                      # [L, d_model]
        err = np.abs(y8[rows].astype(np.float64) - y32[rows])
        assert (err <= bound).all(), (err / bound).max()
        # The a-posteriori form: the actual perturbations k^ - k, v^ - v replace the
        # worst-case ones (tighter; catches a misapplied scale).
        dk = kq[rows].astype(np.float64) * ks - k[rows]
        dv = np.abs(vq[rows].astype(np.float64) * vs - v[rows]).max(axis=0)[kv_head]  # [Hq, D]
        e_act = sm * np.abs(np.einsum("rnx,tnx->rnt", q[rows].astype(np.float64), dk[:, kv_head])).max(axis=2)
        bnd2 = np.expm1(2 * e_act)[:, :, None] * (vmax + dv) + dv
        bnd2 = bnd2 + 2 * (1e-5 + HQ * D * 2.0 ** -24) * vmax
        assert (err <= bnd2.reshape(ql, -1) @ wo.T).all()
        assert (bound < 0.5 * (2 * vmax.reshape(-1) @ wo.T)).all()  # the bound says something
    assert np.abs(y8 - y32).max() > 0


# Test 8: calibrated scales change the stored bytes exactly as quantize_kv says.
@pytest.mark.parametrize("cache_dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_calibrated_scales_change_stored_bytes(cache_dtype):
    b = Batch()
    x = hidden(b.t, "float32", 13)
    rec = Recorder(b)
    lay = layer(12, backend=rec)
    cache = b.cache(FP8[cache_dtype])
    lay.forward_serve(x, b.positions, *b.metadata(), cache, k_scale=0.0371, v_scale=2.5)
    assert rec.calls[0]["k_scale"] == np.float32(0.0371)
    assert rec.calls[0]["v_scale"] == np.float32(2.5)
    _, k, v = lay.project_qkv(x, b.positions)
    kq, vq = rpa.quantize_kv(cache_dtype, k, v, 0.0371, 2.5)
    k1, _ = rpa.quantize_kv(cache_dtype, k, v)
    stored_k = np.stack([cache[p, s, 0::2] for p, s in b.new_slots()])
    stored_v = np.stack([cache[p, s, 1::2] for p, s in b.new_slots()])
    np.testing.assert_array_equal(as_bytes(stored_k), as_bytes(kq))
    np.testing.assert_array_equal(as_bytes(stored_v), as_bytes(vq))
    assert (as_bytes(stored_k) != as_bytes(k1)).any()


def test_kv_cache_dtype_strings():
    assert rpa.kv_cache_dtype("auto", "bfloat16") == "bfloat16"
    assert rpa.kv_cache_dtype("auto", "float32") == "float32"
    assert rpa.kv_cache_dtype("fp8") == "float8_e4m3fn"
    assert rpa.kv_cache_dtype("fp8_e5m2") == "float8_e5m2"
    with pytest.raises(ValueError, match=re.escape(
            'Unknown kv_cache_dtype="int8"; expected one of: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2.')):
        rpa.kv_cache_dtype("int8")
