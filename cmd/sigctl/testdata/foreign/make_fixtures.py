"""Writes the raw Arrow files of TestRunForeignEncodings with pyarrow, an
Arrow implementation SIG does not contain, in the encodings other producers
write for SIG's types: dictionary-encoded strings (int32 indices, as Arrow
JS's tableFromArrays writes them, and int8 or uint16), large_utf8, string_view, and
for list columns large_list, list_view and large_list_view. Each file of a
set holds the same values as its plain file (utf8, list<utf8>), so
`sigctl run` must write the same output for all of them.

Run from the repository root (the files are committed; run again only to
change them):

    python3.11 -m venv /tmp/venv && /tmp/venv/bin/pip install pyarrow==17.0.0
    /tmp/venv/bin/python cmd/sigctl/testdata/foreign/make_fixtures.py
"""

import os
import random

import pyarrow as pa
import pyarrow.ipc as ipc

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = 300
BATCH = 128  # several record batches per file, sharing one dictionary


def write(name, columns):
    """Writes columns (name -> (values, make), make(values) an array) as
    record batches of BATCH rows, each array built from its own rows rather
    than sliced from a whole column: Arrow C++ then writes every buffer as
    long as its rows need (a slice's buffers are written as long as the
    whole column's), which is also how long SIG makes the buffers of a
    column it converts."""
    batches = []
    for lo in range(0, ROWS, BATCH):
        arrays = [make(vals[lo:lo + BATCH]) for vals, make in columns.values()]
        batches.append(pa.record_batch(arrays, names=list(columns)))
    with ipc.new_file(os.path.join(HERE, name), batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)


def dictionary(column, small=False):
    """A maker of dictionary-encoded chunks of column, every chunk with the
    same dictionary (the IPC file format allows one per column): int32
    indices, or with small the narrowest index, int8 when it fits, else
    uint16 (an unsigned index type, which Arrow allows)."""
    values = sorted({v for v in column if v is not None})
    index = {v: i for i, v in enumerate(values)}
    typ = pa.int32()
    if small:
        typ = pa.int8() if len(values) < 128 else pa.uint16()
    dict_array = pa.array(values, pa.string())
    return lambda chunk: pa.DictionaryArray.from_arrays(
        pa.array([None if v is None else index[v] for v in chunk], typ), dict_array)


def ads():
    rng = random.Random(19)
    words = ["red", "Shoes", "running", "cheap", "flights", "to", "Paris", "über", "café", "日本", "a-very-long-token-beyond-twelve"]
    cats = ["shoes", "travel", "food", "books"]

    def text(lo, hi):
        return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))

    ids = list(range(1, ROWS + 1))
    query = [None if i % 17 == 0 else text(0, 5) for i in ids]
    title = [text(1, 8) for _ in ids]
    cat = [None if i % 23 == 0 else rng.choice(cats) for i in ids]
    country = [rng.choice(["us", "fr", "jp"]) for _ in ids]
    cols = {
        "event_id": (ids, lambda v: pa.array(v, pa.int64())),
        "event_time": ([1767225600000000 + 1000 * i for i in ids], lambda v: pa.array(v, pa.int64())),
        "advertiser_id": ([rng.randint(1, 50) for _ in ids], lambda v: pa.array(v, pa.int64())),
        "bid_price": ([rng.random() * 5 for _ in ids], lambda v: pa.array(v, pa.float64())),
    }
    strings = {"query": query, "ad_title": title, "ad_category": cat, "country": country}

    def columns(make):
        c = dict(cols)
        for name, vals in strings.items():
            c[name] = (vals, make(vals))
        return c

    write("ads_utf8.arrow", columns(lambda _: lambda v: pa.array(v, pa.string())))
    write("ads_dict_int32.arrow", columns(dictionary))
    write("ads_dict_small.arrow", columns(lambda col: dictionary(col, small=True)))
    write("ads_large_utf8.arrow", columns(lambda _: lambda v: pa.array(v, pa.large_string())))
    write("ads_string_view.arrow", columns(lambda _: lambda v: pa.array(v, pa.string_view())))


def lists():
    rng = random.Random(20)
    words = ["alpha", "beta", "gamma", "a-token-longer-than-twelve-bytes", ""]
    ids = list(range(1, ROWS + 1))
    tags = [None if i % 13 == 0 else [None if rng.random() < 0.05 else rng.choice(words) for _ in range(rng.randint(0, 4))] for i in ids]
    nums = [None if i % 11 == 0 else [rng.randint(-5, 5) for _ in range(rng.randint(0, 3))] for i in ids]

    def columns(list_type, str_type):
        return {
            "event_id": (ids, lambda v: pa.array(v, pa.int64())),
            "event_time": ([1767225600000000 + 1000 * i for i in ids], lambda v: pa.array(v, pa.int64())),
            "tags": (tags, lambda v: pa.array(v, list_type(str_type))),
            "nums": (nums, lambda v: pa.array(v, list_type(pa.int64()))),
        }

    write("lists_list.arrow", columns(pa.list_, pa.string()))
    write("lists_large_list.arrow", columns(pa.large_list, pa.large_string()))
    write("lists_list_view.arrow", columns(pa.list_view, pa.string_view()))
    write("lists_large_list_view.arrow", columns(pa.large_list_view, pa.string()))


if __name__ == "__main__":
    ads()
    lists()
