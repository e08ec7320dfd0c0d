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
