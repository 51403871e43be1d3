# Reads a loom checkpoint file of format 2 (src/loom/train/chunk_file.cpp): a zip whose records
# are the chunks' index ("index_names", "index_meta", "chunk_crc") and each chunk's elements
# ("chunk/<i>"). Each block of elements is checked against its CRC-32 in "chunk_crc" (an
# implementation of the format apart from loom's own).
import array
import struct
import sys
import zipfile
import zlib

META_COLS = 13  # replica, begin, numel, dtype (c10::ScalarType), ndim, 8 dims


def read(path):
    """{(name, replica, begin): (index row, elements' bytes)} and the rng record (None without)."""
    with zipfile.ZipFile(path) as z:
        prefix = z.namelist()[0].split("/")[0] + "/"
        record = lambda name: z.read(prefix + name)  # noqa: E731
        if record("loom_chunks") != b"2":
            sys.exit(f"{path}: not a loom checkpoint file of format 2")
        names = record("index_names").decode().splitlines()
        meta = array.array("q", record("index_meta"))
        sums = record("chunk_crc") if prefix + "chunk_crc" in z.namelist() else None
        if sums is not None:
            (block,) = struct.unpack_from("<q", sums)
            crcs = array.array("I", sums[8:])
        out, k = {}, 0
        for i, name in enumerate(names):
            row = tuple(meta[i * META_COLS:(i + 1) * META_COLS])
            data = record(f"chunk/{i}")
            for at in range(0, len(data), block) if sums is not None else []:
                if zlib.crc32(data[at:at + block]) != crcs[k]:
                    sys.exit(f"{path}: bytes {at}.. of '{name}' do not match their CRC-32")
                k += 1
            out[(name, row[0], row[1])] = (row, data)
        if sums is not None and k != len(crcs):
            sys.exit(f"{path}: chunk_crc holds {len(crcs)} CRC-32s, the chunks have {k} blocks")
        rng = record("rng") if prefix + "rng" in z.namelist() else None
    return out, rng


def tensor(row, data):
    """A chunk's elements as a 1-D torch tensor."""
    import torch

    dtypes = {6: torch.float32, 7: torch.float64, 15: torch.bfloat16, 5: torch.float16,
              4: torch.int64, 3: torch.int32, 0: torch.uint8}
    return torch.frombuffer(bytearray(data), dtype=dtypes[row[3]])
