"""A file drop on an object store: put a large file, get it back, verify it.

python examples/file_drop.py                          # an embedded nats-server
python examples/file_drop.py nats://127.0.0.1:4222    # or your own server (JetStream enabled)
python examples/file_drop.py URL --size-mib 512       # a bigger file (default 32 MiB)

A service drops build artifacts into the ``drops`` bucket; another process fetches them. The file goes in
chunk by chunk (128 KiB each) and comes out the same way, so neither side holds it in memory whatever its
size. ``get_file`` writes through a temporary file renamed into place only after the SHA-256 digest checked
out, so a half-written or corrupted download never appears under the target name. Any client of the object
store (nats.go, nats.js, nats-py, the nats CLI) can fetch the same object.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import resource
import sys
import tempfile
import time
from pathlib import Path

import jetstream_sync
from jetstream_sync import ObjectMeta, ObjectStoreConfig
from jetstream_sync.testing import ServerNotInstalledError


def make_file(path: Path, size: int) -> str:
    """Write ``size`` bytes of varied data to ``path``; return its SHA-256 (hex)."""
    sha = hashlib.sha256()
    block = 1024 * 1024
    with open(path, "wb") as out:
        for i in range(0, size, block):
            piece = hashlib.sha256(i.to_bytes(8, "big")).digest() * (min(block, size - i) // 32)
            sha.update(piece)
            out.write(piece)
    return sha.hexdigest()


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1024 * 1024):
            sha.update(piece)
    return sha.hexdigest()


def run(url: str, size: int) -> None:
    with jetstream_sync.connect(url, name="file-drop") as nc, tempfile.TemporaryDirectory() as tmp:
        js = nc.jetstream()
        drops = js.create_or_update_object_store(ObjectStoreConfig(bucket="drops", description="build artifacts"))

        source = Path(tmp) / "app.tar"
        expected = make_file(source, size)
        started = time.monotonic()
        info = drops.put_file(
            "builds/1.4.2/app.tar",
            source,
            meta=ObjectMeta(description="release 1.4.2", headers={"Content-Type": "application/x-tar"}),
        )
        seconds = time.monotonic() - started
        mib = info.size / 2**20
        print(f"put {info.name}: {mib:.0f} MiB in {info.chunks} chunks, {mib / seconds:.0f} MiB/s")
        print(f"digest {info.digest}")

        target = Path(tmp) / "downloaded.tar"
        started = time.monotonic()
        got = drops.get_file("builds/1.4.2/app.tar", target)  # the digest is verified before the rename
        seconds = time.monotonic() - started
        print(f"get_file: {target.stat().st_size / 2**20:.0f} MiB in {seconds:.2f}s ({got.description})")
        if sha256_of(target) != expected:
            raise SystemExit("the downloaded file differs from the original")
        print("verified: the downloaded file is identical to the original")

        with drops.get("builds/1.4.2/app.tar") as reader:  # or stream it: a readable binary file
            sha = hashlib.sha256()
            while piece := reader.read(64 * 1024):
                sha.update(piece)
        print(f"streamed read: sha256 {'matches' if sha.hexdigest() == expected else 'DIFFERS'}")

        drops.add_link("builds/latest/app.tar", info)
        print(f"objects: {', '.join(sorted(i.name for i in drops.list()))}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(f"peak RSS of this process: {peak:.0f} MiB for a {size / 2**20:.0f} MiB file")
        js.delete_object_store("drops")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="a nats-server with JetStream (default: start an embedded one)")
    parser.add_argument("--size-mib", type=int, default=32, help="size of the file to drop (MiB)")
    args = parser.parse_args()
    size = args.size_mib * 1024 * 1024
    if args.url:
        run(args.url, size)
        return
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server, contextlib.suppress(KeyboardInterrupt):
        print(f"started an embedded nats-server at {server.url}")
        run(server.url, size)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/file_drop.py nats://127.0.0.1:4222")
