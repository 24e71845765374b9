"""rpa.cast against ml_dtypes / numpy astype, bit for bit.

Sources: all 65,536 bf16 and f16 bit patterns and 10^6 f32 values (random bits, exact
ties and their neighbours for every target format, subnormals, the overflow thresholds,
+-inf, NaN). Targets: every rpa dtype.

One documented difference: numpy's own float16 <-> float32 casts keep NaN payloads bits
(0x7C01 -> 0x7F802000), while rpa returns the canonical quiet NaN with the sign, as
ml_dtypes does for bf16 and fp8. For those two pairs NaNs are compared by NaN-ness and
sign; every other element is compared bit for bit.
"""
import ml_dtypes
import numpy as np
import pytest

import rpa

DTYPES = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def bits(a):
    return np.ascontiguousarray(a).view(UINT[a.dtype.itemsize])


def astype(x, dtype):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(dtype)


def is_nan(a):
    return np.isnan(a.astype(np.float32))


def assert_same_bits(x, got, want, nan_by_sign):
    """got == want bit for bit; NaNs only by NaN-ness and sign where nan_by_sign."""
    assert got.dtype == want.dtype and got.shape == want.shape
    keep = np.ones(x.shape, bool)
    if nan_by_sign:
        nan = is_nan(want)
        np.testing.assert_array_equal(is_nan(got), nan)
        np.testing.assert_array_equal(bits(got)[nan] >> (8 * got.itemsize - 1),
                                      bits(want)[nan] >> (8 * want.itemsize - 1))
        keep = ~nan
    mismatch = np.flatnonzero(bits(got)[keep] != bits(want)[keep])
    assert mismatch.size == 0, (
        f"{x.dtype.name}->{got.dtype.name}: {mismatch.size} mismatches, first input bits "
        f"{hex(int(bits(x)[keep][mismatch[0]]))}: got {hex(int(bits(got)[keep][mismatch[0]]))}"
        f" want {hex(int(bits(want)[keep][mismatch[0]]))}")


def numpy_native_f16(source, target):
    """True for the casts numpy does itself, keeping NaN payloads (module docstring)."""
    return {np.dtype(source).name, np.dtype(target).name} == {"float16", "float32"}


def assert_cast_matches(x, name):
    assert_same_bits(x, rpa.cast(x, name), astype(x, DTYPES[name]),
                     numpy_native_f16(x.dtype, DTYPES[name]))


@pytest.mark.parametrize("target", list(DTYPES))
@pytest.mark.parametrize("source", ["bfloat16", "float16"])
def test_all_16_bit_inputs(source, target):
    x = np.arange(65536, dtype=np.uint16).view(DTYPES[source])
    assert_cast_matches(x, target)


def tricky_f32(n, seed=0):
    """n f32 values hitting every rounding and overflow branch of every target."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 2**32, n // 8, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    # Midpoints between adjacent codes of each narrow format (exact in f32), and the f32
    # values one ulp either side: ties to even and the decisions next to them.
    for name in ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"]:
        dt = DTYPES[name]
        size = dt.itemsize
        codes = rng.integers(0, 2 ** (8 * size) - 1, n // 24, dtype=np.uint64).astype(UINT[size])
        lo = codes.view(dt).astype(np.float32)
        hi = (codes + 1).astype(UINT[size]).view(dt).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            mid = (lo.astype(np.float64) + hi.astype(np.float64)) / 2
        mid = mid[np.isfinite(mid)].astype(np.float32)
        parts += [mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    # Subnormals of every format (and f32's own), and the overflow thresholds.
    exps = rng.integers(-150, -5, n // 8)
    parts.append((rng.uniform(-2, 2, n // 8) * np.exp2(exps.astype(np.float64))).astype(np.float32))
    edges = np.array([448, 464, 480, 57344, 59392, 61440, 65504, 65520, 65536, 3.3895314e38,
                      np.finfo(np.float32).max], np.float32)
    with np.errstate(over="ignore"):
        up = np.nextafter(edges, np.float32(np.inf))
    near = np.concatenate([edges, np.nextafter(edges, np.float32(0)), up])
    parts.append(np.concatenate([near, -near]))
    parts.append(rng.uniform(-70000, 70000, n // 16).astype(np.float32))
    special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0], np.float32)
    parts.append(special)
    x = np.concatenate(parts)
    assert x.size <= n
    return np.concatenate([x, rng.standard_normal(n - x.size).astype(np.float32)])


F32_INPUTS = tricky_f32(10**6)


@pytest.mark.parametrize("target", list(DTYPES))
def test_million_f32_inputs(target):
    assert F32_INPUTS.size == 10**6
    assert_cast_matches(F32_INPUTS, target)


@pytest.mark.parametrize("target", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"])
def test_saturate_equals_clip_then_cast(target):
    dt = DTYPES[target]
    fmax = np.float32(ml_dtypes.finfo(dt).max)
    want = astype(np.clip(F32_INPUTS, -fmax, fmax), dt)  # np.clip keeps NaN
    got = rpa.cast(F32_INPUTS, target, saturate=True)
    assert_same_bits(F32_INPUTS, got, want, numpy_native_f16(np.float32, dt))


def test_dtype_arguments_and_shapes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12.5
    want = bits(astype(x, ml_dtypes.float8_e4m3fn))
    for dtype in ["float8_e4m3fn", ml_dtypes.float8_e4m3fn, np.dtype(ml_dtypes.float8_e4m3fn)]:
        got = rpa.cast(x, dtype)
        assert got.shape == (2, 3, 4) and got.dtype == DTYPES["float8_e4m3fn"]
        np.testing.assert_array_equal(bits(got), want)
    strided = x[:, ::2, 1::2]  # not contiguous
    np.testing.assert_array_equal(bits(rpa.cast(strided, "bfloat16")),
                                  bits(astype(strided, ml_dtypes.bfloat16)))
    assert rpa.cast(np.array(3.0, np.float32), "float16").shape == ()
    assert rpa.cast(np.zeros(0, np.float32), "float8_e5m2").size == 0


def test_errors_raise_value_error():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="dtype='fp8' is not supported"):
        rpa.cast(x, "fp8")
    with pytest.raises(ValueError, match="is not supported"):
        rpa.cast(x, np.int32)
    with pytest.raises(ValueError, match="unsupported dtype float64"):
        rpa.cast(np.ones(4), "bfloat16")
