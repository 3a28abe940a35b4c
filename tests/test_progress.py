"""Progress: plain lines in a log file (no carriage returns), a tqdm bar on a terminal."""
import io

from codist.rank.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(stream) -> str:
    p = Progress(total=4, initial=0, desc="run", enabled=True, stream=stream)
    for done in (1, 2):
        p.step()
    p.evaluated(2, "val_accuracy", 0.5)
    p.close()
    return stream.getvalue()


def test_a_log_file_gets_one_plain_line_per_evaluation():
    text = run(io.StringIO())
    assert "\r" not in text
    assert text.startswith("run: update 2/4 val_accuracy=0.5000 (") and text.count("\n") == 1


def test_a_terminal_gets_a_bar_and_other_ranks_nothing():
    assert "\r" in run(Terminal())
    quiet = io.StringIO()
    p = Progress(total=4, initial=0, desc="run", enabled=False, stream=quiet)
    p.step()
    p.evaluated(1, "val_loss", 1.0)
    p.close()
    assert quiet.getvalue() == ""
