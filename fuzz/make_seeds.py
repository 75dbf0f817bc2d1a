"""Writes the fuzz seed corpus: small valid safetensors files and broken variants.

Usage: python3 fuzz/make_seeds.py OUT_DIR (plain Python, no third-party packages).
"""
import json
import os
import struct
import sys


def file_bytes(header, data=b"", raw_header=None, pad=True):
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def seeds():
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}
    for name, size in sizes.items():
        yield f"valid_{name}", file_bytes({"t": entry(name, [2, 3], 0, 6 * size)}, bytes(range(6 * size)))
    two = {"__metadata__": {"format": "pt"}, "a": entry("F32", [2], 0, 8), "b": entry("I8", [3], 8, 11)}
    yield "valid_two_meta", file_bytes(two, bytes(11))
    yield "valid_empty", file_bytes({})
    yield "valid_scalar", file_bytes({"s": entry("F64", [], 0, 8)}, bytes(8))
    yield "valid_zero_size", file_bytes({"z": entry("F32", [0, 5], 0, 0)})
    # Broken: each breaks one rule.
    yield "bad_gap", file_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12))
    yield "bad_overlap", file_bytes({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}, bytes(8))
    yield "bad_size", file_bytes({"a": entry("F32", [3], 0, 8)}, bytes(8))
    yield "bad_trailing", file_bytes({"a": entry("F32", [1], 0, 4)}, bytes(9))
    yield "bad_truncated", file_bytes({"a": entry("F32", [4], 0, 16)}, bytes(7))
    yield "bad_dtype", file_bytes({"a": entry("F128", [1], 0, 16)}, bytes(16))
    yield "bad_overflow", file_bytes({"a": entry("F64", [2**62, 8], 0, 8)}, bytes(8))
    yield "bad_negative", file_bytes({"a": entry("F32", [-1], 0, 4)}, bytes(4))
    yield "bad_meta", file_bytes({"__metadata__": {"k": 1}})
    yield "bad_duplicate", file_bytes(None, b"", b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                                  b'"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}')
    yield "bad_json", file_bytes(None, b"", b'{"a":')
    yield "bad_utf8", file_bytes(None, b"", b'{"\xff":1}')
    yield "bad_not_object", file_bytes(None, b"", b"[1,2]")
    yield "bad_length", struct.pack("<Q", 2**40) + b"{}"
    yield "bad_short", b"\x02\x00\x00"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
