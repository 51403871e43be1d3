# Reads a loom checkpoint file of format 2 (src/loom/train/chunk_file.cpp): a zip of stored
# records: the chunks' index ("index_names", "index_meta", "chunk_crc") and each chunk's elements
# ("chunk/<i>"). The zip's own CRC-32 fields are 0 (loom checks its blocks' instead), which
# zipfile's read() refuses, so records are read at their offsets; each block of elements is
# checked against its CRC-32 in "chunk_crc" (an implementation of the format apart from loom's).
import array
import struct
import sys
import zipfile
import zlib

META_COLS = 13  # replica, begin, numel, dtype (c10::ScalarType), ndim, 8 dims


def read(path):
    """{(name, replica, begin): (index row, elements' bytes)} and the rng record (None without)."""
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        prefix = z.namelist()[0].split("/")[0] + "/"
        names_in_zip = set(z.namelist())

        def record(name):
            info = z.getinfo(prefix + name)
            f.seek(info.header_offset)
            head = f.read(30)  # the local header: its name and extra field's lengths at 26
            if head[:4] != b"PK\x03\x04" or info.compress_type != zipfile.ZIP_STORED:
                sys.exit(f"{path}: record {name} is not a stored zip record")
            n, m = struct.unpack_from("<HH", head, 26)
            f.seek(info.header_offset + 30 + n + m)
            return f.read(info.file_size)

        if record("loom_chunks") != b"2":
            sys.exit(f"{path}: not a loom checkpoint file of format 2")
        names = record("index_names").decode().splitlines()
        meta = array.array("q", record("index_meta"))
        sums = record("chunk_crc") if prefix + "chunk_crc" in names_in_zip else None
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
        rng = record("rng") if prefix + "rng" in names_in_zip else None
    return out, rng


def tensor(row, data):
    """A chunk's elements as a 1-D torch tensor."""
    import torch

    dtypes = {6: torch.float32, 7: torch.float64, 15: torch.bfloat16, 5: torch.float16,
              4: torch.int64, 3: torch.int32, 0: torch.uint8}
    return torch.frombuffer(bytearray(data), dtype=dtypes[row[3]])
