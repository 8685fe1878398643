"""CSV answers: the column-at-a-time text is exactly what ``csv.writer`` writes for every row."""

from __future__ import annotations

import csv
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from service.wire import csv_answer


def written(out: dict) -> str:
    """The reference: ``csv.writer`` over ``csv_answer.table``, floats by ``repr``."""
    header, rows = csv_answer.table(out)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([repr(v) if isinstance(v, float) else v for v in row] for row in rows)
    return buffer.getvalue()


FLOAT = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.0, 1e-300, 0.1])
TEXT = st.text(max_size=4) | st.sampled_from(["a,b", 'say "x"', "two\nlines", "cr\r", "", " s "])
LABEL = st.one_of(
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=1, max_size=6),
    st.lists(FLOAT, min_size=1, max_size=6),
    st.lists(TEXT, min_size=1, max_size=6),
    st.lists(st.sampled_from(["setosa", "versicolor"]), min_size=1, max_size=6),
)


@st.composite
def outputs(draw) -> dict:
    labels = draw(LABEL)
    n = len(labels)
    classes = draw(st.lists(TEXT | st.integers(0, 9), min_size=2, max_size=3, unique=True))
    k = len(classes)
    matrix = st.lists(st.lists(FLOAT, min_size=k, max_size=k), min_size=n, max_size=n)
    out = {"classes": classes, "model_id": "m", "version": 1}
    if draw(st.booleans()):
        out["predictions"] = labels
    if draw(st.booleans()):
        vector = st.lists(FLOAT, min_size=n, max_size=n)
        out["decision_function"] = draw(matrix if draw(st.booleans()) else vector)
    if draw(st.booleans()):
        out["probabilities"] = draw(matrix)
    if draw(st.booleans()):
        out["intervals"] = {"lower": draw(matrix), "upper": draw(matrix)}
    return out


@settings(max_examples=400, deadline=None)
@given(out=outputs())
def test_the_text_is_what_csv_writer_writes(out) -> None:
    assert csv_answer.csv_text(out) == written(out)


def test_plain_columns_skip_csv_writer_and_others_do_not(monkeypatch) -> None:
    rows_written = []
    real = csv.writer

    def spy(*args, **kwargs):
        writer = real(*args, **kwargs)

        class Spy:
            writerow = writer.writerow

            def writerows(self, rows):
                rows_written.append(1)
                return writer.writerows(rows)

        return Spy()

    monkeypatch.setattr(csv_answer.csv, "writer", spy)
    plain = {"classes": ["a", "b"], "predictions": ["a", "b"], "decision_function": [0.5, -1.0]}
    assert csv_answer.csv_text(plain) == "label,decision_b\na,0.5\nb,-1.0\n" and not rows_written
    assert csv_answer.csv_text({**plain, "predictions": ["a,x", "b"]}).startswith(
        'label,decision_b\n"a,x",0.5\n'
    )
    assert rows_written == [1]  # a label csv.writer quotes: the whole table goes through it
