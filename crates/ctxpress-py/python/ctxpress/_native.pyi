"""Type stubs of the extension module ``ctxpress._native`` (JSON text in, JSON text out)."""

from os import PathLike
from typing import List, Optional, Tuple, Union

__version__: str

class Archive:
    """A store of originals: what ``compress`` archives and ``expand`` reads."""

class SqliteArchive(Archive):
    """Originals kept in a SQLite file (created if missing)."""

    path: str
    def __init__(self, path: Union[str, "PathLike[str]"]) -> None: ...

class MemoryArchive(Archive):
    """Originals kept in memory for the life of this object."""

    def __init__(self) -> None: ...

class Compressor:
    config: str
    needs_llm: bool
    def __init__(
        self,
        preset: Optional[str] = None,
        config: Optional[str] = None,
        budget: Optional[int] = None,
        window: Optional[int] = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[str] = None,
        config_name: Optional[str] = None,
    ) -> None: ...
    def compress(self, text: str, positions: bool = True) -> Tuple[str, str]: ...
    def compress_many(self, texts: List[str], jobs: Optional[int] = None) -> List[Tuple[str, str]]: ...

class Session:
    config: str
    needs_llm: bool
    trigger: int
    target: int
    compactions: int
    def __init__(
        self,
        preset: Optional[str] = None,
        config: Optional[str] = None,
        budget: Optional[int] = None,
        window: Optional[int] = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[str] = None,
        config_name: Optional[str] = None,
    ) -> None: ...
    def prepare(self, text: str, positions: bool = True) -> Tuple[str, str]: ...

def expand(text: str, archive: Archive, positions: bool = True) -> Tuple[str, List[int]]: ...
def recall(handle: str, archive: Archive) -> Optional[str]: ...
def validate(text: str, positions: bool = True) -> str: ...
def stats(texts: List[str], tokenizer: str = "heuristic", positions: bool = True) -> str: ...
def presets() -> List[Tuple[str, str, str]]: ...
def strategies() -> List[Tuple[str, str, str, List[Tuple[str, str]], bool]]: ...
