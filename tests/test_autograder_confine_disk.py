"""A sandbox's writable space on one size-capped tmpfs (:func:`sandbox_disk.mount_disk`) and its
temporary folders inside it (:func:`confine.tmp_folders`, :func:`sandbox_disk.make_tmp_folders`).

The cap holds whatever the number of files; the temporary folders are made empty before
each run without following anything a run planted there.
"""

import os

import pytest

from autograder import confine, sandbox_disk


def test_the_temporary_folders_are_made_empty_without_following_links(tmp_path):
    top = str(tmp_path / "sandbox")
    os.mkdir(top)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    sandbox_disk.make_tmp_folders(top)
    subs = confine.tmp_folders(top)
    assert set(subs) == set(confine.TMP_DIRS)
    for sub in subs.values():
        assert os.path.isdir(sub) and os.stat(sub).st_mode & 0o7777 == 0o1777
    planted = os.path.join(subs["/tmp"], "repeval-tests-x")
    os.symlink(victim, planted)
    with open(os.path.join(subs["/dev/shm"], "left.bin"), "wb") as fh:
        fh.write(b"x")
    sandbox_disk.make_tmp_folders(top)
    assert all(os.listdir(sub) == [] for sub in subs.values())
    assert (victim / "keep.txt").read_text() == "keep"
    with pytest.raises(ValueError, match="top"):
        confine.tmp_folders("")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_the_disk_cap_holds_whatever_the_number_of_files(tmp_path):
    top = tmp_path / "sandbox"
    top.mkdir()
    libc = confine.load_libc()
    assert sandbox_disk.mount_disk(libc, str(top), 4 << 20)
    try:
        written = 0
        with pytest.raises(OSError):
            for i in range(100):
                (top / f"f{i}").write_bytes(b"x" * (256 << 10))
                written += 1
        assert written * (256 << 10) <= 4 << 20
    finally:
        assert sandbox_disk.unmount_disk(libc, str(top))
    assert os.listdir(top) == []
    with pytest.raises(ValueError, match="size"):
        sandbox_disk.mount_disk(libc, str(top), 0)
    (top / "x").write_text("x")
    with pytest.raises(ValueError, match="empty folder"):
        sandbox_disk.mount_disk(libc, str(top), 1 << 20)
