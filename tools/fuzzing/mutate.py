"""Structure-aware mutations: of JSON values, YAML text, pickle integers, safetensors headers
and of the file chosen in a multi-file input; byte-level mutations as the fallback of each.

Every mutator takes the input and a ``random.Random`` and returns new bytes. The engine (atheris
or the fallback loop) mixes these with its own byte mutations.
"""

from __future__ import annotations

import json
import pickletools
import random
import re
import struct
from collections.abc import Callable
from typing import Any

# Values that break arithmetic, allocation and timers: what a human tester would type.
INTERESTING_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    7,
    255,
    256,
    65535,
    2**31 - 1,
    2**31,
    2**32,
    2**53,
    2**63 - 1,
    2**63,
    2**64,
    10**9,
    10**12,
    10**18,
    10**30,
    -(2**63),
    1e9,
    1e308,
    -1e308,
    1.5,
    -0.0,
    1e-300,
)
INTERESTING_TEXT: tuple[str, ...] = (
    "",
    " ",
    "..",
    "../../etc/passwd",
    "/etc/passwd",
    "a" * 300,
    "\u00e9",
    "\x00",
    "auto",
    "true",
    "no",
    "maybe",
    "1e308",
    "nan",
    "inf",
    "-1",
    "0",
    "F8_E4M3",
    "BOOL",
    "I64",
)
# YAML tokens (a dictionary, in libFuzzer's sense): anchors, aliases, merge keys, tags, flows.
YAML_TOKENS: tuple[str, ...] = (
    "&a ",
    "*a",
    "<<: *a\n",
    "&b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n",
    "<<: [*a, *a]\n",
    "!!python/object/apply:os.system ['true']",
    "!!binary AA==",
    "{",
    "}",
    "[",
    "]",
    ": ",
    "- ",
    "? ",
    "---\n",
    "...\n",
    "'",
    '"',
    "\t",
    "%YAML 1.1\n",
    "!!int ",
    "!!float ",
    ".inf",
    "~",
)


def _walk(node: Any, out: list[tuple[Any, Any]]) -> None:
    if isinstance(node, dict):
        for key in list(node):
            out.append((node, key))
            _walk(node[key], out)
    elif isinstance(node, list):
        for i in range(len(node)):
            out.append((node, i))
            _walk(node[i], out)


def _new_value(old: Any, rng: random.Random, spots: list[tuple[Any, Any]]) -> Any:
    choice = rng.random()
    if isinstance(old, bool) or choice < 0.1:
        return rng.choice((None, True, False, [], {}, "x", 0))
    if isinstance(old, (int, float)) and choice < 0.7:
        return rng.choice(INTERESTING_NUMBERS)
    if isinstance(old, str) and choice < 0.6:
        return rng.choice(INTERESTING_TEXT)
    if isinstance(old, list) and old and choice < 0.6:
        return old + old if rng.random() < 0.5 else old[: rng.randrange(len(old))]
    if spots and choice < 0.8:  # another value of the same document (a shape as an offset ...)
        parent, key = rng.choice(spots)
        return json.loads(json.dumps(parent[key]))
    return rng.choice(INTERESTING_NUMBERS + INTERESTING_TEXT)


def mutate_json_value(value: Any, rng: random.Random) -> Any:
    """One to three changes of a decoded JSON document: a value, a key, a removal."""
    for _ in range(rng.randint(1, 3)):
        spots: list[tuple[Any, Any]] = []
        _walk(value, spots)
        if not spots:
            return rng.choice(({}, [], None, 1, "x"))
        parent, key = rng.choice(spots)
        op = rng.random()
        if op < 0.15:
            del parent[key]
        elif op < 0.25 and isinstance(parent, dict):
            parent[rng.choice(INTERESTING_TEXT)] = parent.pop(key)
        else:
            parent[key] = _new_value(parent[key], rng, spots)
    return value


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    try:
        value = json.loads(data)
    except ValueError:
        return mutate_bytes(data, rng)
    return json.dumps(mutate_json_value(value, rng), indent=rng.choice((None, 2))).encode()


def mutate_yaml(data: bytes, rng: random.Random) -> bytes:
    """Insert YAML tokens at line starts or after colons, duplicate or drop lines."""
    lines = data.decode("utf-8", "replace").splitlines(keepends=True) or [""]
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.4:
            line = lines[i]
            cut = line.find(": ") + 2 if ": " in line and rng.random() < 0.7 else 0
            lines[i] = line[:cut] + rng.choice(YAML_TOKENS) + line[cut:]
        elif op < 0.6:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op < 0.7 and len(lines) > 1:
            del lines[i]
        elif op < 0.75:
            lines = _yaml_expansion(lines, rng)
        elif op < 0.85:
            head, _, tail = lines[i].partition(": ")
            if tail:
                lines[i] = f"{head}: {rng.choice(INTERESTING_NUMBERS + INTERESTING_TEXT)}\n"
        else:
            lines[i] = "  " * rng.randint(1, 40) + lines[i]
    return "".join(lines).encode()


_ANCHOR = re.compile(r"&(x\d+) ([\[{])")


def _yaml_expansion(lines: list[str], rng: random.Random) -> list[str]:
    """Add anchored nodes that each repeat the one before several times: a merge key (``<<``)
    over a list of aliases of a mapping, or a list of aliases, nested over a few levels. The
    chain goes on from the last such node of the text when there is one, so that mutating a
    mutated input nests deeper (a "billion laughs" grows from a few of these)."""
    found = _ANCHOR.findall("".join(lines))
    if found and rng.random() < 0.7:
        prior, mapping = found[-1][0], found[-1][1] == "{"
        number = int(prior[1:])
    else:  # a new base: a few plain pairs of the document, anchored
        pairs = [ln.strip() for ln in lines if ": " in ln and not ln.startswith((" ", "-", "x"))]
        picked = rng.sample(pairs, min(len(pairs), rng.randint(1, 3))) or ["a: 1"]
        number, mapping = len(found) + rng.randrange(1000), rng.random() < 0.7
        prior = f"x{number}"
        body = "{" + ", ".join(picked) + "}" if mapping else "[" + ", ".join(picked) + "]"
        lines = [*lines, *([] if not lines or lines[-1].endswith("\n") else ["\n"])]
        lines.append(f"{prior}: &{prior} {body}\n")
    for _ in range(rng.randint(1, 9)):
        number += 1
        aliases = ", ".join([f"*{prior}"] * rng.randint(2, 9))
        body = f"{{<<: [{aliases}]}}" if mapping else f"[{aliases}]"
        prior = f"x{number}"
        lines.append(f"{prior}: &{prior} {body}\n")
    return lines


def mutate_pickle(data: bytes, rng: random.Random) -> bytes:
    """Replace integers of a pickle stream (sizes, offsets, lengths) by interesting ones."""
    try:
        ints = [(op, pos) for op, _arg, pos in pickletools.genops(data) if op.name in _INT_OPS]
    except Exception:
        return mutate_bytes(data, rng)
    if not ints:
        return mutate_bytes(data, rng)
    chosen = rng.sample(ints, min(len(ints), rng.randint(1, 3)))
    # Last first: a swap changes the length of what follows it, not the positions before it.
    for op, pos in sorted(chosen, key=lambda found: found[1], reverse=True):
        data = _swap_int(data, op, pos, rng)
    return data


_INT_OPS = {"BININT", "BININT1", "BININT2", "LONG1"}


def _swap_int(data: bytes, op: Any, pos: int, rng: random.Random) -> bytes:
    size = {"BININT": 5, "BININT1": 2, "BININT2": 3}.get(op.name)
    if size is None:  # LONG1: opcode, length byte, little-endian two's complement
        size = 2 + data[pos + 1]
    value = int(rng.choice([n for n in INTERESTING_NUMBERS if isinstance(n, int)]))
    raw = value.to_bytes((value.bit_length() + 8) // 8 or 1, "little", signed=True)
    return data[:pos] + b"\x8a" + bytes([len(raw)]) + raw + data[pos + size :]


def mutate_safetensors(data: bytes, rng: random.Random) -> bytes:
    """Mutate the JSON header of a safetensors file, keeping its length field right (mostly)."""
    if len(data) < 8:
        return mutate_bytes(data, rng)
    (length,) = struct.unpack("<Q", data[:8])
    header, body = data[8 : 8 + length], data[8 + length :]
    if rng.random() < 0.15:
        return mutate_bytes(data, rng)
    new = mutate_json(header, rng)
    if rng.random() < 0.2:
        body = body[: rng.randrange(len(body) + 1)] if rng.random() < 0.5 else body + body
    return struct.pack("<Q", len(new)) + new + body


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """Classic byte mutations: flip, insert, delete, duplicate, overwrite with a number."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randrange(len(buf) + 1)
        if op < 0.25 and buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op < 0.45:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op < 0.65 and buf:
            del buf[at : at + rng.randint(1, 16)]
        elif op < 0.8 and buf:
            start = rng.randrange(len(buf))
            buf[at:at] = buf[start : start + rng.randint(1, 64)]
        else:
            buf[at : at + 8] = str(rng.choice(INTERESTING_NUMBERS)).encode()
    return bytes(buf)


MUTATORS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "json": mutate_json,
    "yaml": mutate_yaml,
    "pickle": mutate_pickle,
    "safetensors": mutate_safetensors,
    "bytes": mutate_bytes,
    "text": mutate_bytes,
}


def split_selected(data: bytes) -> tuple[int, bytes]:
    """A multi-file input: its first byte chooses the file, the rest is that file's bytes."""
    return (data[0], data[1:]) if data else (0, b"")


def mutate(data: bytes, fmt: str | dict[int, str], rng: random.Random) -> bytes:
    """One structure-aware mutation of ``data``. ``fmt`` names its format, or, for a
    multi-file input, maps each file's selector to its format."""
    plain = rng.random() < 0.15  # a file that no longer parses at all
    if isinstance(fmt, dict):
        which, body = split_selected(data)
        kind = "bytes" if plain else fmt.get(which, "bytes")
        return bytes([which]) + MUTATORS[kind](body, rng)
    return MUTATORS["bytes" if plain else fmt](data, rng)
