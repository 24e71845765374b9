#!/usr/bin/env python3
"""Writes the reference data tests/model/gguf_oracle_test.cc checks rpa's model code against.

    make_gguf_vectors.py OUT_DIR [--model-dir DIR]

The oracle is the PyPI `gguf` package (llama.cpp's own Python reader and numpy
dequantizers), which shares no code with rpa. Files written to OUT_DIR:

  quant_sizes.txt        "code name block_size type_size" for every ggml type gguf knows.
  dequant_random.bin     random blocks of every type rpa dequantizes, with gguf's f32 output.
  writer_sample.gguf     a small file written by gguf.GGUFWriter: every metadata value type,
                         arrays, tensors of several types, a non-default alignment;
  writer_sample.dump     ... and what GGUFReader reads back from it.
  <model>.dump           GGUFReader's view of each real model found in --model-dir, and
  <model>.rows.bin       the first rows of one tensor of each type, dequantized by gguf.

Dumps are text, one item per line, fields separated by tabs:
  file     <size>  <alignment>  <data_offset>  <n_kv>  <n_tensors>
  kv       <key>  <type>  <value>                    scalars; strings hex-encoded
  kv       <key>  array  <elem type>  <count>  <first>  <last>   (first/last: "-" if empty)
  tensor   <name>  <ggml code>  <ne0,ne1,...>  <absolute offset>  <n_bytes>
Float values are written as the hex of their IEEE bits so comparisons are exact.
Binary records (little-endian): u32 ggml code, u32 name length, name, u64 n_values,
u64 n_bytes, bytes, n_values x f32.

A real model's dump is reused while the model file, this script and the gguf version are
unchanged, because
GGUFReader needs ~10 s to read Gemma's 262k-token vocabulary.
"""

import argparse
import importlib.metadata
import os
import struct
import sys

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFValueType as VT
except ImportError:
    sys.exit("make_gguf_vectors.py: the PyPI package `gguf` is missing "
             "(scripts/install-deps installs it)")

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]
DEQUANT_TYPES = [QT.F32, QT.F16, QT.BF16, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q8_0, QT.Q4_K, QT.Q6_K]
TYPE_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16",
              VT.UINT32: "u32", VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool",
              VT.STRING: "string", VT.ARRAY: "array", VT.UINT64: "u64", VT.INT64: "i64",
              VT.FLOAT64: "f64"}


# ---- dequantization vectors ----------------------------------------------------------

def record(qtype, name, raw, values):
    raw = np.ascontiguousarray(raw, dtype=np.uint8).tobytes()
    values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    nb = name.encode()
    return (struct.pack("<II", int(qtype), len(nb)) + nb +
            struct.pack("<QQ", values.size, len(raw)) + raw + values.tobytes())


def random_f16_scales(rng, n, lo_exp, hi_exp):
    """n random f16 values of both signs with magnitudes in [2^lo_exp, 2^hi_exp)."""
    mag = np.exp2(rng.uniform(lo_exp, hi_exp, n))
    sign = rng.choice([-1.0, 1.0], n)
    return (mag * sign).astype(np.float16)


def random_blocks(rng, qtype, n_blocks, realistic):
    """Raw bytes of n_blocks blocks. realistic: scales are sane finite f16 values (the
    rest random), as a quantizer would write; otherwise every byte is random, so scales
    include subnormals, infinities and NaNs."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if not realistic:
        return raw
    # Byte offsets of the f16 scales inside each block.
    f16_at = {QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q8_0: [0],
              QT.Q4_K: [0, 2], QT.Q6_K: [208], QT.F16: range(0, size, 2)}.get(qtype, [])
    for off in f16_at:
        raw[:, off:off + 2] = random_f16_scales(rng, n_blocks, -20, 4).view(np.uint8).reshape(
            n_blocks, 2)
    if qtype == QT.F32:
        raw = rng.standard_normal(n_blocks).astype(np.float32).view(np.uint8).reshape(
            n_blocks, size)
    if qtype == QT.BF16:
        vals = rng.standard_normal(n_blocks).astype(np.float32).view(np.uint32) >> 16
        raw = vals.astype(np.uint16).view(np.uint8).reshape(n_blocks, size)
    return raw


def write_random_dequant(out_dir, rng):
    chunks = []
    for qtype in DEQUANT_TYPES:
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        for realistic in (True, False):
            n_blocks = max(1, 4096 // block)  # >= 16 blocks per K-quant, 4096 plain values
            raw = random_blocks(rng, qtype, n_blocks, realistic)
            with np.errstate(all="ignore"):  # inf/NaN scales in the all-random case
                values = gguf.quants.dequantize(raw.reshape(-1), qtype)
            chunks.append(record(qtype, f"random-{'realistic' if realistic else 'bytes'}",
                                 raw, values))
    with open(os.path.join(out_dir, "dequant_random.bin"), "wb") as f:
        f.write(b"".join(chunks))


def write_quant_sizes(out_dir):
    with open(os.path.join(out_dir, "quant_sizes.txt"), "w") as f:
        for qtype, (block, size) in sorted(gguf.GGML_QUANT_SIZES.items()):
            f.write(f"{int(qtype)} {qtype.name} {block} {size}\n")


# ---- dumps ---------------------------------------------------------------------------

def fmt_scalar(vtype, part):
    """A scalar as the C++ side prints it: ints decimal, floats as IEEE-bit hex, strings
    as hex bytes."""
    if vtype == VT.STRING:
        return bytes(part).hex() or "-"
    v = part[0]
    if vtype == VT.FLOAT32:
        return "%08x" % np.float32(v).view(np.uint32)
    if vtype == VT.FLOAT64:
        return "%016x" % np.float64(v).view(np.uint64)
    if vtype == VT.BOOL:
        return str(int(bool(v)))
    return str(int(v))


def dump(path, out_path):
    r = gguf.GGUFReader(path)
    lines = []
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    lines.append(f"file\t{os.path.getsize(path)}\t{r.alignment}\t{r.data_offset}\t"
                 f"{len(fields)}\t{len(r.tensors)}")
    for key, f in fields:
        vtype = f.types[0]
        if vtype == VT.ARRAY:
            etype = f.types[1] if len(f.types) > 1 else VT.UINT8
            n = len(f.data)
            first = fmt_scalar(etype, f.parts[f.data[0]]) if n else "-"
            last = fmt_scalar(etype, f.parts[f.data[-1]]) if n else "-"
            lines.append(f"kv\t{key}\tarray\t{TYPE_NAMES[etype]}\t{n}\t{first}\t{last}")
        else:
            lines.append(f"kv\t{key}\t{TYPE_NAMES[vtype]}\t"
                         f"{fmt_scalar(vtype, f.parts[f.data[0]])}")
    for t in r.tensors:
        ne = ",".join(str(int(x)) for x in t.shape)  # ggml order: ne[0] first
        lines.append(f"tensor\t{t.name}\t{int(t.tensor_type)}\t{ne}\t{t.data_offset}\t"
                     f"{t.n_bytes}")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return r


def write_real_rows(r, out_path, rows_per_tensor=2):
    """First rows of the first tensor of each type, with gguf's dequantization."""
    seen = set()
    chunks = []
    for t in r.tensors:
        if t.tensor_type in seen or t.tensor_type not in DEQUANT_TYPES:
            continue
        seen.add(t.tensor_type)
        row_len = int(t.shape[0])
        rows = min(rows_per_tensor, int(t.n_elements) // row_len)
        row_bytes = t.n_bytes // (int(t.n_elements) // row_len)
        raw = np.asarray(r.data[t.data_offset:t.data_offset + rows * row_bytes], dtype=np.uint8)
        values = gguf.quants.dequantize(raw, t.tensor_type)
        chunks.append(record(t.tensor_type, t.name, raw, values))
    with open(out_path, "wb") as f:
        f.write(b"".join(chunks))


def write_sample(out_dir, rng):
    """A small GGUF through the oracle's writer; the C++ test parses it and compares with
    what the oracle's reader says is in it."""
    path = os.path.join(out_dir, "writer_sample.gguf")
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.0e-5)
    w.add_bool("t.bool", True)
    w.add_string("t.string", "héllo wörld")
    w.add_string("t.empty", "")
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 3.141592653589793)
    w.add_array("t.strings", ["a", "", "bc", "<|im_start|>"])
    w.add_array("t.f32s", [0.5, -2.25, 1e30])
    w.add_array("t.i32s", [-1, 0, 7, 2**31 - 1])
    w.add_array("t.empty_array", [])
    w.add_custom_alignment(64)  # not the default 32: the reader must honour it
    tensors = {}
    for i, qtype in enumerate(DEQUANT_TYPES):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        ne0, ne1 = 2 * max(block, 32), 3  # rows of 2 blocks (64 values for plain types)
        raw = random_blocks(rng, qtype, ne0 * ne1 // block, True).reshape(ne1, -1)
        name = f"t{i}.{qtype.name}"
        w.add_tensor(name, raw, raw_dtype=qtype)  # raw: [ne1, row bytes]
        tensors[name] = (qtype, raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = dump(path, os.path.join(out_dir, "writer_sample.dump"))
    write_real_rows(r, os.path.join(out_dir, "writer_sample.rows.bin"), rows_per_tensor=3)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--model-dir", default=os.environ.get("RPA_MODEL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "rpa", "models"))
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(20261129)
    write_quant_sizes(args.out_dir)
    write_random_dequant(args.out_dir, rng)
    write_sample(args.out_dir, rng)
    for model in MODELS:
        path = os.path.join(args.model_dir, model)
        stem = os.path.join(args.out_dir, model)
        if not os.path.isfile(path):
            print(f"make_gguf_vectors.py: {path} not fetched; its checks will be skipped")
            for suffix in (".dump", ".rows.bin", ".stamp"):
                if os.path.exists(stem + suffix):
                    os.unlink(stem + suffix)
            continue
        st = os.stat(path)
        # Regenerate when the model, this script or the oracle's version changes.
        stamp = (f"{path} {st.st_size} {st.st_mtime_ns} {os.stat(__file__).st_mtime_ns} "
                 f"gguf {importlib.metadata.version('gguf')}\n")
        try:
            with open(stem + ".stamp") as f:
                if f.read() == stamp and os.path.exists(stem + ".rows.bin"):
                    continue
        except FileNotFoundError:
            pass
        r = dump(path, stem + ".dump")
        write_real_rows(r, stem + ".rows.bin")
        with open(stem + ".stamp", "w") as f:
            f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
