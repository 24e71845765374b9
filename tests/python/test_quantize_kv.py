"""rpa.quantize_kv against the contract's numpy formula (rpa-contract.md §4):
clip(x.astype(f32) / f32(scale), -max, max).astype(fp8), bit for bit."""
import ml_dtypes
import numpy as np
import pytest

import rpa

FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


def reference(x, scale, name):
    dt = np.dtype(FP8[name])
    fmax = np.float32(ml_dtypes.finfo(dt).max)
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(np.float32) / np.float32(scale)
        return np.clip(y, -fmax, fmax).astype(dt)  # np.clip keeps NaN


def inputs(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
    flat = x.reshape(-1)
    flat[:8] = [np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 464.0, 61440.0]
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("name", list(FP8))
@pytest.mark.parametrize("src", [np.float32, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("k_scale,v_scale", [(1.0, 1.0), (0.5, 2.0), (3.7, 1e-3)])
def test_matches_numpy_formula(name, src, k_scale, v_scale):
    key, value = inputs((17, 3, 80), src, 1), inputs((17, 3, 80), src, 2)
    k, v = rpa.quantize_kv(name, key, value, k_scale=k_scale, v_scale=v_scale)
    assert k.dtype == np.dtype(FP8[name]) and k.shape == key.shape and v.shape == value.shape
    np.testing.assert_array_equal(k.view(np.uint8), reference(key, k_scale, name).view(np.uint8))
    np.testing.assert_array_equal(v.view(np.uint8), reference(value, v_scale, name).view(np.uint8))
    finite_in = ~np.isnan(key.astype(np.float32))
    assert np.isfinite(k.astype(np.float32)[finite_in]).all()


def test_contract_vectors():
    x = np.array([1000.0, -1e30, np.nan], np.float32).astype(ml_dtypes.bfloat16).reshape(1, 1, 3)
    k, _ = rpa.quantize_kv(ml_dtypes.float8_e4m3fn, x, x)
    assert list(k.view(np.uint8).reshape(-1)) == [0x7E, 0xFE, 0x7F]


def test_errors_raise_value_error():
    x = np.ones((2, 1, 4), np.float32)
    with pytest.raises(ValueError, match="cache_dtype=bfloat16 is not an fp8 dtype"):
        rpa.quantize_kv("bfloat16", x, x)
    with pytest.raises(ValueError, match=r"Expected k.shape=\(2, 1, 4\) to be equal to v.shape=\(2, 1, 3\)"):
        rpa.quantize_kv("float8_e4m3fn", x, np.ones((2, 1, 3), np.float32))
    for bad in [0.0, -1.0, float("inf"), float("nan")]:
        with pytest.raises(ValueError, match="k_scale=.* must be finite and > 0"):
            rpa.quantize_kv("float8_e5m2", x, x, k_scale=bad)
        with pytest.raises(ValueError, match="v_scale=.* must be finite and > 0"):
            rpa.quantize_kv("float8_e5m2", x, x, v_scale=bad)
    with pytest.raises(ValueError, match="is not supported"):
        rpa.quantize_kv("fp8", x, x)
