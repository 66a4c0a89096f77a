"""Which local files a path, a glob or a directory names (resolve_files)."""

import os

import pytest

from tfrecord_lite.errors import TFRecordError
from tfrecord_lite.files import resolve_files


def touch(root, *names):
    for name in names:
        path = os.path.join(str(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"")


def test_double_star_lists_each_file_once_through_symlinked_directories(tmp_path):
    """``**`` went into symlinked directories as Python's glob does: a link back to an
    ancestor (a loop) listed each file ~40 times, once per level until ELOOP, and two such
    links never finished. Each directory is now walked once, under its own name when it is
    in the tree; a link to a directory outside the tree is still followed."""
    touch(tmp_path, "d/a.tfrecord", "d/sub/b.tfrecord", "outside/c.tfrecord", "outside/deep/e.tfrecord")
    d = tmp_path / "d"
    os.symlink("..", d / "sub" / "up")             # a loop
    os.symlink(str(d), d / "self")                 # another, absolute
    os.symlink("sub", d / "alias")                 # a second name for a directory in the tree
    os.symlink(str(tmp_path / "outside"), d / "ext")
    os.symlink("../../outside/deep", d / "sub" / "ext2")  # inside what ext reaches too
    found = [os.path.relpath(p, d) for p in resolve_files(str(d / "**" / "*.tfrecord"))]
    assert found == ["a.tfrecord", "ext/c.tfrecord", "ext/deep/e.tfrecord", "sub/b.tfrecord"]
    assert resolve_files(str(d / "**")) == resolve_files(str(d / "**" / "*.tfrecord"))
    assert [os.path.relpath(p, d) for p in resolve_files(str(d / "**" / "deep" / "*"))] == ["ext/deep/e.tfrecord"]
    assert [os.path.relpath(p, d) for p in resolve_files(str(d / "*" / "*.tfrecord"))] == [
        "alias/b.tfrecord", "ext/c.tfrecord", "self/a.tfrecord", "sub/b.tfrecord"]  # "*" follows links, once


def test_double_star_matches_relative_and_repeated(tmp_path, monkeypatch):
    touch(tmp_path, "a.tfrecord", "x/b.tfrecord", "x/y/c.tfrecord", "x/.h/d.tfrecord", "x/y/c.tfrecord.index")
    monkeypatch.chdir(tmp_path)
    assert resolve_files("**/*.tfrecord") == ["a.tfrecord", "x/b.tfrecord", "x/y/c.tfrecord"]
    assert resolve_files("**/x/**/*.tfrecord") == ["x/b.tfrecord", "x/y/c.tfrecord"]  # each once
    assert resolve_files("*/**/c.*") == ["x/y/c.tfrecord"]
    assert resolve_files("x/.h/**") == ["x/.h/d.tfrecord"]


def test_of_two_links_to_one_directory_the_first_is_followed(tmp_path):
    touch(tmp_path, "outside/c.tfrecord", "d/a.tfrecord")
    for name in ("z", "b", "m"):
        os.symlink(str(tmp_path / "outside"), tmp_path / "d" / name)
    assert resolve_files(str(tmp_path / "d" / "**")) == [str(tmp_path / "d" / n) for n in ("a.tfrecord", "b/c.tfrecord")]


def test_a_glob_or_directory_that_names_no_file_says_why(tmp_path, monkeypatch):
    """'no TFRecord files found' said to pass a glob or a directory that holds files, also
    when the glob's directory did not exist (a typo) or the directory held only directories."""
    touch(tmp_path, "data/train/a.tfrecord", "data/.hidden/b.tfrecord")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TFRecordError, match="no TFRecord files found for 'dta/train/\\*.tfrecord'") as info:
        resolve_files("dta/train/*.tfrecord")
    assert info.value.hint == f"the directory 'dta/train' does not exist (relative to {str(tmp_path)!r})"
    with pytest.raises(TFRecordError, match="no TFRecord files found for 'data'") as info:
        resolve_files("data")
    assert info.value.hint == ("it holds directories but no files: for the files at every depth under it, pass "
                               "'data/**/*.tfrecord'")
    assert resolve_files("data/**/*.tfrecord") == ["data/train/a.tfrecord"]
    with pytest.raises(TFRecordError, match="no TFRecord files found") as info:
        resolve_files(str(tmp_path / "dta" / "*"))
    assert info.value.hint == f"the directory {str(tmp_path / 'dta')!r} does not exist"
    with pytest.raises(TFRecordError, match="no TFRecord files found") as info:
        resolve_files("~/data/*.tfrecord")
    assert info.value.hint == "the directory '~/data' does not exist: '~' is not expanded, pass os.path.expanduser(pattern)"
    for spec in ("data/train/*.gz", "data/train/*/*"):
        with pytest.raises(TFRecordError, match="no TFRecord files found") as info:
            resolve_files(spec)
        assert info.value.hint == "pass a list of paths, a glob pattern or a directory that holds files"


def test_a_broken_symlink_is_listed_so_that_reading_it_fails(tmp_path):
    """Directories and globs kept only what os.path.isfile accepts, so a link to a file on a
    disk that is not mounted was left out without a word, and the data read was silently
    short. It is listed (as a shell's glob lists it), and reading it names it."""
    import tfrecord_lite as tfl

    touch(tmp_path, "d/a.tfrecord")
    os.symlink(str(tmp_path / "unmounted" / "b.tfrecord"), tmp_path / "d" / "b.tfrecord")
    want = [str(tmp_path / "d" / "a.tfrecord"), str(tmp_path / "d" / "b.tfrecord")]
    for spec in ("d", "d/*.tfrecord", "d/**/*.tfrecord", "d/**"):
        assert resolve_files(str(tmp_path / spec)) == want
    assert resolve_files(str(tmp_path / "**" / "b.tfrecord")) == want[1:]
    with pytest.raises(FileNotFoundError) as info:
        list(tfl.TFRecordDataset(str(tmp_path / "d")))
    assert info.value.filename == want[1]


def test_a_caret_bracket_matches_any_character_but_those_listed(tmp_path):
    """[^a] matched the files named '^...' or 'a...' (Python's glob), where shells and
    tf.io.gfile.glob match every name but 'a...': it negates now, as [!a] does, on local
    disk and (files.caret_negates) on remote stores alike; a file named so is still itself."""
    touch(tmp_path, "a.tfrecord", "b.tfrecord", "^.tfrecord", "]x.tfrecord", "s/[^a].tfrecord", "s/a.tfrecord")
    names = lambda spec: [os.path.relpath(p, tmp_path) for p in resolve_files(str(tmp_path / spec))]  # noqa: E731
    assert names("[^a].tfrecord") == names("[!a].tfrecord") == ["^.tfrecord", "b.tfrecord"]
    assert names("[^]a]*.tfrecord") == ["^.tfrecord", "b.tfrecord"]
    assert names("[a^].tfrecord") == ["^.tfrecord", "a.tfrecord"]
    assert names("**/[^b].tfrecord") == ["^.tfrecord", "a.tfrecord", "s/a.tfrecord"]
    assert names("s/[^a].tfrecord") == ["s/[^a].tfrecord"]
