"""Progress bars on stderr (:mod:`ntpcert.util.progress`)."""


def test_a_bar_into_a_pipe_writes_plain_lines():
    import io

    from ntpcert.util.progress import progress_bar

    buf = io.StringIO()  # not a terminal, as a pipe or a log file
    bar = progress_bar(True, total=3, desc="work", file=buf, mininterval=0)
    for _ in range(3):
        bar.update(1)
    bar.close()
    text = buf.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines and lines[-1].startswith("work: 100%") and "3/3" in lines[-1]


def test_a_separability_decision_names_each_engine_and_the_bar_counts_every_epoch(capsys):
    """A decision that passes through several engines says which one runs (it printed nothing for minutes
    after the structured solver's bar), and the structured bar counts epochs, not progress reads."""
    import re

    from ntpcert.pipeline.decide import decide_separability
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.instance.datasets.teacher import teacher

    inst = teacher(m=300, d=12, V=14, seed=1)  # separable, m >= 2d, past the small HiGHS LP
    verdict, _ = decide_separability(KeslerSystem.build(inst), progress=True)
    err = capsys.readouterr().err
    assert "separability: screening token pairs" in err
    steps = [ln for ln in err.splitlines() if ln.startswith("separability: ")]
    assert len(steps) >= 2, err
    if "separability: the structured solver" in err:
        counts = [int(c) for c in re.findall(r"structured:(\d+)epoch", err.replace(" ", ""))]
        assert counts and counts == sorted(counts) and counts[-1] > 1
        assert len(counts) <= 3  # into a pipe: a line at most every PIPE_INTERVAL_S, not one per progress read
    decide_separability(KeslerSystem.build(inst), progress=False)
    assert capsys.readouterr().err == ""
