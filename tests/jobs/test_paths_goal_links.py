"""verify._exists (a paths goal's present/absent) answers a literal path as claims.walk_glob
answers a glob: through no link on the way. A worker whose goal is `present: out/report.md`
could make `out` a link to a directory outside the repository holding report.md; the literal
goal used to be met that way (os.path.lexists follows every link but the last) while the glob
spelling `out/*.md` was not. Found by an adversarial review."""

from __future__ import annotations

import os

from proctor.jobs import verify


def test_a_literal_path_through_a_link_is_no_more_present_than_its_glob(tmp_path):
    checkout = tmp_path / "repo"
    checkout.mkdir()
    (checkout / ".git").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.md").write_text("not the checkout's\n")
    os.symlink(str(elsewhere), str(checkout / "out"))
    by_glob = verify._exists(str(checkout), "out/*.md")
    by_literal = verify._exists(str(checkout), "out/report.md")
    assert by_glob is False
    assert by_literal is False, "a literal path reached through a link outside the repository counts as present"
