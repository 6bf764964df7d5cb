"""The real tokenizer files (tests/data/tokenizers) as one folder, for the fixture scripts.

The large ones (hf/*/tokenizer.json, gguf-vocab/*.gguf) are kept packed in
tests/data/tokenizers/packed.tar.xz (cmake/test_data.cmake says why); unpacked() puts the folder
together in a temporary directory, once per process, and returns it. Fixtures are still written
to tests/data/tokenizers (SOURCE).
"""
import atexit
import functools
import pathlib
import shutil
import tarfile
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizers"
ARCHIVE = SOURCE / "packed.tar.xz"


@functools.cache
def unpacked() -> pathlib.Path:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kvinfer-tokenizers-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    root = tmp / "tokenizers"
    shutil.copytree(SOURCE, root, ignore=shutil.ignore_patterns(ARCHIVE.name))
    with tarfile.open(ARCHIVE, "r:xz") as tar:
        tar.extractall(root, filter="data")
    return root
