"""core.data: safe reading, column detection, validation and splitting; files built in
tmp_path."""

import codecs
import datetime as dt
import io
import json
import zipfile
from pathlib import Path

import openpyxl
import openpyxl.xml
import pandas as pd
import pytest

from core.data.columns import detect_columns, detect_text_column
from core.data.dataset import Dataset, slice_rows, split_dataset
from core.data.intake import load_table
from core.data.limits import DataError, IntakeLimits
from core.data.validation import load_dataset, validate

CFPB_TRAIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "cfpb-sample" / "train.csv"
CONTRACT_KEYS = {
    "text_col", "label_col", "rows_read", "rows_kept", "dropped", "labels", "duplicates",
    "conflicts", "warnings",
}  # fmt: skip
DESKS = ("UPI Dispute", "Card Fraud", "Loan Query")
# sha256 of the lines `["paid twice", "UPI"]` and `["card lost", "Card"]`, each + "\n".
FINGERPRINT = "d5b6a1324a7aa423ebbd462c2f5a29b675d84f5a62e50b039ab6fa97a9d21f3d"
LEGACY_FINGERPRINT = "a3677873d72d146f98626389535cef654f234b55e0cc2e2a41d53fd47a0b3fed"


def _complaints(per_desk: int = 6) -> pd.DataFrame:
    """A tiny labelled table: `per_desk` distinct complaints for each desk."""
    rows = [
        {
            "id": f"{d}{i:03d}",
            "complaint": f"complaint {i} about {desk.lower()} issue",
            "desk": desk,
        }
        for d, desk in enumerate(DESKS)
        for i in range(per_desk)
    ]
    return pd.DataFrame(rows, dtype="str")


def _write_xlsx(path: Path, rows: list[list[object]], *, title: str = "Complaints") -> Path:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    workbook.create_sheet("Notes").append(["ignored", "sheet"])
    workbook.save(path)
    return path


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------------------------
# Reading CSV / TSV

SIMPLE = "text,label\ncafé – naïve refund,UPI Dispute\nsecond complaint,Card Fraud\n"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (SIMPLE.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + SIMPLE.encode("utf-8"), "utf-8-sig"),
        (codecs.BOM_UTF16_LE + SIMPLE.encode("utf-16-le"), "utf-16-le"),
        (codecs.BOM_UTF16_BE + SIMPLE.encode("utf-16-be"), "utf-16-be"),
        (SIMPLE.encode("cp1252"), "cp1252"),
    ],
)
def test_csv_encodings_are_decoded_and_reported(tmp_path, data, encoding):
    path = tmp_path / "in.csv"
    path.write_bytes(data)
    df = load_table(path)
    assert list(df.columns) == ["text", "label"]
    assert df["text"].tolist() == ["café – naïve refund", "second complaint"]
    assert df.attrs["encoding"] == encoding
    assert df.attrs["format"] == "csv"


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_delimiters_are_detected(tmp_path, delimiter):
    cell = '"paid 500, not credited"' if delimiter == "," else "paid 500, not credited"
    lines = [["id", "text", "label"], ["1", cell, "UPI"], ["2", "card; blocked", "Card"]]
    text = "".join(delimiter.join(line) + "\n" for line in lines).replace(
        "card; blocked", '"card; blocked"' if delimiter == ";" else "card; blocked"
    )
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8")
    df = load_table(path)
    assert df.attrs["delimiter"] == delimiter
    assert df["text"].tolist() == ["paid 500, not credited", "card; blocked"]


def test_tsv_always_uses_tab(tmp_path):
    path = tmp_path / "in.tsv"
    path.write_text("text\tlabel\nrefund, please; now\tUPI\n", encoding="utf-8")
    df = load_table(path)
    assert df.attrs["delimiter"] == "\t"
    assert df.loc[0, "text"] == "refund, please; now"


def test_quoted_multiline_cells_and_strings_are_kept_verbatim(tmp_path):
    text = (
        " id , text ,label,date\n"
        '00123,"line one\nline two, with comma",NA,2024-01-02\n'
        '00007,"say ""hi""",,01/02/2024\n'
    )
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8")
    df = load_table(path)
    assert list(df.columns) == ["id", "text", "label", "date"]
    assert df["id"].tolist() == ["00123", "00007"]
    assert df.loc[0, "text"] == "line one\nline two, with comma"
    assert df.loc[1, "text"] == 'say "hi"'
    assert df.loc[0, "label"] == "NA"  # only empty cells are missing
    assert pd.isna(df.loc[1, "label"])
    assert df["date"].tolist() == ["2024-01-02", "01/02/2024"]


def test_sources_path_bytes_and_uploaded_file(tmp_path):
    data = SIMPLE.encode("utf-8")
    path = tmp_path / "in.CSV"
    path.write_bytes(data)
    upload = io.BytesIO(data)
    upload.name = "upload.csv"
    upload.read()  # a page may have read it already
    frames = [
        load_table(str(path)),
        load_table(path),
        load_table(data, filename="x.csv"),
        load_table(upload),
    ]
    for df in frames:
        assert df["label"].tolist() == ["UPI Dispute", "Card Fraud"]
    with pytest.raises(DataError, match="filename="):
        load_table(data)


def test_blank_lines_keep_row_numbers_and_trailing_ones_are_dropped(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("text,label\na complaint,A\n\nanother one,B\n\n\n", encoding="utf-8")
    df = load_table(path)
    assert len(df) == 3  # the interior blank line stays a row so row numbers match
    assert pd.isna(df.loc[1, "text"])


# ----------------------------------------------------------------------------------------------
# Reading XLSX and Parquet


def test_xlsx_first_sheet_read_as_strings(tmp_path):
    rows = [
        [" Complaint ", "DESK", "amount", "opened", "flag", "code"],
        ["card blocked", "Card Fraud", 1500, dt.datetime(2024, 3, 1), True, "00123"],
        ["upi stuck", "UPI Dispute", 2.5, dt.datetime(2024, 3, 1, 10, 30), False, None],
    ]
    path = _write_xlsx(tmp_path / "in.xlsx", rows)
    df = load_table(path)
    assert list(df.columns) == ["Complaint", "DESK", "amount", "opened", "flag", "code"]
    assert df.attrs["sheet"] == "Complaints"
    assert df["amount"].tolist() == ["1500", "2.5"]
    assert df["opened"].tolist() == ["2024-03-01", "2024-03-01 10:30:00"]
    assert df["flag"].tolist() == ["TRUE", "FALSE"]
    assert df.loc[0, "code"] == "00123"
    assert pd.isna(df.loc[1, "code"])


def test_xlsx_formula_without_cached_value_reads_as_empty(tmp_path):
    path = _write_xlsx(tmp_path / "f.xlsx", [["text", "total"], ["complaint", "=SUM(1,2)"]])
    df = load_table(path)
    assert pd.isna(df.loc[0, "total"])  # formulas are never evaluated


def test_parquet_columns_become_strings(tmp_path):
    source = pd.DataFrame(
        {"text": ["a b c", "d e f", None], "label": ["x", "y", "x"], "n": [1, None, 3]},
        index=[5, 7, 9],  # an unnamed, non-default index is stored as a column
    )
    source["n"] = source["n"].astype("Int64")
    path = tmp_path / "in.parquet"
    source.to_parquet(path)
    df = load_table(path)
    assert list(df.columns) == ["text", "label", "n"]
    assert df["n"].tolist()[0] == "1" and pd.isna(df["n"].tolist()[1])
    assert df.attrs["format"] == "parquet"


# ----------------------------------------------------------------------------------------------
# Refused files


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("old.xls", ".xls workbooks are not supported; save it as .xlsx or .csv"),
        ("macro.xlsm", ".xlsm workbooks"),
        ("notes.txt", "'.txt' files are not supported"),
        ("noext", "files without a suffix"),
    ],
)
def test_unsupported_suffixes_are_refused(name, needle):
    with pytest.raises(DataError) as error:
        load_table(b"whatever", filename=name)
    assert needle in _one_line(error)


def test_encrypted_xlsx_is_refused(tmp_path):
    path = tmp_path / "locked.xlsx"
    marker = "EncryptedPackage".encode("utf-16-le")
    path.write_bytes(bytes.fromhex("D0CF11E0A1B11AE1") + b"\x00" * 64 + marker + b"junk" * 50)
    with pytest.raises(DataError) as error:
        load_table(path)
    assert "password-protected; remove the password" in _one_line(error)


def test_ole2_without_encryption_marker_is_still_refused(tmp_path):
    path = tmp_path / "renamed.xlsx"
    path.write_bytes(bytes.fromhex("D0CF11E0A1B11AE1") + b"junk" * 50)
    with pytest.raises(DataError, match="password-protected or an old .xls"):
        load_table(path)


def test_zip_bomb_is_refused_quickly_without_decompressing(tmp_path, monkeypatch):
    path = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/worksheets/sheet1.xml", b"\x00" * (20 * 1024**2))
    assert path.stat().st_size < 200_000

    def no_unpacking(*args, **kwargs):
        raise AssertionError("a member was opened")

    monkeypatch.setattr(zipfile.ZipFile, "open", no_unpacking)  # quick: no member is read
    with pytest.raises(DataError) as error:
        load_table(path)
    assert "zip bomb" in _one_line(error)


def test_declared_uncompressed_total_is_limited(tmp_path):
    path = _write_xlsx(tmp_path / "big.xlsx", [["text", "label"], ["a", "b"]])
    limits = IntakeLimits(max_xlsx_uncompressed_bytes=1000)
    with pytest.raises(DataError, match="above the .* MB limit for workbooks"):
        load_table(path, limits=limits)


@pytest.mark.parametrize("damage", ["truncate", "junk"])
def test_corrupt_xlsx_is_refused(tmp_path, damage):
    good = _write_xlsx(tmp_path / "good.xlsx", [["text", "label"], ["a", "b"]]).read_bytes()
    data = good[: len(good) // 2] if damage == "truncate" else b"PK\x03\x04" + b"\x01" * 300
    with pytest.raises(DataError) as error:
        load_table(data, filename="broken.xlsx")
    assert "not a valid .xlsx workbook" in _one_line(error)


def test_zip_that_is_not_a_workbook_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(DataError, match="not an Excel workbook"):
        load_table(buffer.getvalue(), filename="x.xlsx")


def test_xlsx_refused_when_openpyxl_does_not_use_defusedxml(tmp_path, monkeypatch):
    assert openpyxl.xml.DEFUSEDXML is True
    path = _write_xlsx(tmp_path / "ok.xlsx", [["text", "label"], ["a", "b"]])
    monkeypatch.setattr(openpyxl.xml, "DEFUSEDXML", False)
    with pytest.raises(DataError, match="defusedxml"):
        load_table(path)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "is empty"),
        (b"  \n\n", "is empty"),
        (b"text,label\n", "no data rows"),
        (b"text,label\n,\n\n", "no data rows"),
        (bytes(range(256)) * 8, "neither UTF-8 nor Windows-1252"),
        (b"text,label\nfine,A\nbad\x00row,B\n", "NUL byte on line 3"),
        (b"PK\x03\x04rest-of-a-workbook", "give it the .xlsx suffix"),
        (b"text,label\na,A\nb,B,extra\n", "row 3 has 3 cells but the header has 2"),
        (b'text,label\na,A\n"never closed,B\n', "starts in row 3 is never closed"),
    ],
)
def test_bad_csv_is_refused_with_one_line(data, needle):
    with pytest.raises(DataError) as error:
        load_table(data, filename="bad.csv")
    assert needle in _one_line(error)


def test_bad_parquet_is_refused():
    with pytest.raises(DataError, match="could not be read as Parquet"):
        load_table(b"PAR1 not really parquet", filename="x.parquet")


def test_too_many_rows_in_every_format(tmp_path):
    limits = IntakeLimits(max_rows=3)
    rows = [["text", "label"]] + [[f"complaint {i}", "A"] for i in range(4)]
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    pq_path = tmp_path / "rows.parquet"
    pd.DataFrame(rows[1:], columns=rows[0]).to_parquet(pq_path)
    for path in (csv_path, _write_xlsx(tmp_path / "rows.xlsx", rows), pq_path):
        with pytest.raises(DataError) as error:
            load_table(path, limits=limits)
        assert "has more than 3 rows; split the file or raise the limit with " in _one_line(error)
        assert "GRIEVANCE_LENS_MAX_ROWS" in str(error.value)
    assert len(load_table(csv_path, limits=IntakeLimits(max_rows=4))) == 4


def test_too_big_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("text,label\n" + "x,A\n" * 100, encoding="utf-8")
    limits = IntakeLimits(max_file_bytes=100)
    for source in (path, path.read_bytes(), io.BytesIO(path.read_bytes())):
        with pytest.raises(DataError, match="above the .* MB limit; .*GRIEVANCE_LENS_MAX_FILE_MB"):
            load_table(source, filename="big.csv", limits=limits)


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_table(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("text,label,text\na,b,c\n", "duplicate column names: 'text' (columns A, C)"),
        ("text, label ,label\na,b,c\n", "duplicate column names: 'label' (columns B, C)"),
        ("text,,label\na,b,c\n", "column B has values but no name"),
        (",,\na,b,c\n", "the first row holds no column names"),
    ],
)
def test_bad_column_names_are_refused(text, needle):
    with pytest.raises(DataError) as error:
        load_table(text.encode(), filename="cols.csv")
    assert needle in _one_line(error)


def test_unnamed_empty_columns_are_ignored():
    df = load_table(b"text,label,\na,b,\nc,d,\n", filename="trailing.csv")
    assert list(df.columns) == ["text", "label"]


# ----------------------------------------------------------------------------------------------
# Limits from the environment


def test_limits_from_env():
    limits = IntakeLimits.from_env(
        {"GRIEVANCE_LENS_MAX_FILE_MB": "1.5", "GRIEVANCE_LENS_MAX_ROWS": "10"}
    )
    assert limits.max_file_bytes == int(1.5 * 1024**2)
    assert limits.max_rows == 10
    assert IntakeLimits.from_env({}) == IntakeLimits()
    assert IntakeLimits.from_env({"GRIEVANCE_LENS_MAX_ROWS": " "}) == IntakeLimits()


@pytest.mark.parametrize(
    "env",
    [
        {"GRIEVANCE_LENS_MAX_ROWS": "0"},
        {"GRIEVANCE_LENS_MAX_ROWS": "1e3"},
        {"GRIEVANCE_LENS_MAX_ROWS": "-5"},
        {"GRIEVANCE_LENS_MAX_FILE_MB": "lots"},
        {"GRIEVANCE_LENS_MAX_FILE_MB": "-1"},
        {"GRIEVANCE_LENS_MAX_FILE_MB": "inf"},
    ],
)
def test_invalid_env_limits_are_refused(env):
    variable = next(iter(env))
    with pytest.raises(DataError, match=variable):
        IntakeLimits.from_env(env)


def test_limits_reject_nonsense():
    with pytest.raises(DataError, match="max_rows"):
        IntakeLimits(max_rows=0)


# ----------------------------------------------------------------------------------------------
# Column detection


def test_detection_by_name_ignores_case_and_whitespace():
    df = pd.DataFrame({"ID": ["1", "2"], "  Complaint ": ["a b", "c d"], "DESK": ["x", "y"]})
    choice = detect_columns(df)
    assert (choice.text_col, choice.label_col) == ("  Complaint ", "DESK")
    assert "named" in choice.text_reason and "named" in choice.label_reason


def test_detection_prefers_the_priority_order():
    df = pd.DataFrame({"description": ["a b"], "Text": ["c d"], "product": ["p"], "label": ["l"]})
    choice = detect_columns(df)
    assert (choice.text_col, choice.label_col) == ("Text", "label")
    cfpb = pd.DataFrame({"Consumer complaint narrative": ["a b"], "Product": ["p"]})
    assert detect_columns(cfpb).text_col == "Consumer complaint narrative"


def test_detection_falls_back_to_length_and_cardinality():
    n = 12
    df = pd.DataFrame(
        {
            "ticket_id": [f"T{i % 3}" for i in range(n)],  # id-like name: never a label
            "summary": [
                f"money debited {i} times but the merchant says not received" for i in range(n)
            ],
            "team": ["UPI", "Cards", "Loans"] * 4,
            "channel": ["app", "branch"] * 6,
        }
    )
    choice = detect_columns(df)
    assert choice.text_col == "summary"
    assert choice.label_col == "channel"  # fullest candidate, rightmost on a tie
    assert "team" in choice.label_reason  # the other candidate is named
    assert detect_columns(df, label_col="team").label_col == "team"


def test_detection_failure_lists_columns():
    df = pd.DataFrame({"a": ["1", "2", "3"], "b": ["x", "y", "z"]})
    with pytest.raises(DataError) as error:
        detect_columns(df)
    message = _one_line(error)
    assert "the file has: a, b" in message and "--text-col" in message
    texts = pd.DataFrame({"text": [f"complaint number {i}" for i in range(6)], "b": list("abcdef")})
    with pytest.raises(DataError, match="--label-col"):
        detect_columns(texts)


# ----------------------------------------------------------------------------------------------
# Validation


def test_unknown_columns_are_listed():
    df = pd.DataFrame({"id": ["1"], "complaint": ["x y"], "desk": ["A"]})
    with pytest.raises(DataError) as error:
        validate(df, text_col="complant")
    assert _one_line(error).startswith("no column 'complant'; the file has: id, complaint, desk")
    assert "did you mean 'complaint'" in str(error.value)
    with pytest.raises(DataError, match="no column 'queue'"):
        validate(df, label_col="queue")


def test_dropped_rows_are_numbered_like_the_spreadsheet(tmp_path):
    path = tmp_path / "drops.csv"
    path.write_text(
        "text,label\nfirst one,A\n   ,A\nthird one,\nfourth one,B\n\nsixth one,  \n",
        encoding="utf-8",
    )
    dataset, report = validate(load_table(path))
    assert [(d.row, d.reason) for d in report.dropped] == [
        (3, "empty text"),
        (4, "missing label"),
        (6, "empty text"),
        (7, "missing label"),
    ]
    assert dataset.rows == (2, 5)
    assert (report.rows_read, report.rows_kept) == (6, 2)
    assert report.warnings[0].startswith("4 rows dropped (2 empty text, 2 missing label)")


def test_casing_variants_are_reported_not_merged():
    df = pd.DataFrame(
        {"text": [f"t {i} x" for i in range(6)],
         "label": ["UPI Dispute", " upi dispute", "UPI  dispute", "Card", "Card", "Card"]}
    )  # fmt: skip
    dataset, report = validate(df)
    assert report.labels == {"Card": 3, "UPI  dispute": 1, "UPI Dispute": 1, "upi dispute": 1}
    assert report.casing_variants == (("UPI  dispute", "UPI Dispute", "upi dispute"),)
    assert "upi dispute" in dataset.classes and "UPI Dispute" in dataset.classes
    assert any("differ only in casing" in w for w in report.warnings)


def test_duplicates_and_conflicts_are_counted_and_kept():
    texts = ["same text", "same text", "same text", "other text", "other text", "third text"]
    labels = ["A", "A", "B", "A", "A", "B"]
    dataset, report = validate(pd.DataFrame({"text": texts, "label": labels}))
    assert report.duplicates == 3  # rows 3, 4 and 6 repeat an earlier text
    assert report.conflicts == 1  # only "same text" carries two labels
    assert len(dataset) == 6
    assert any("repeat the text of an earlier row" in w for w in report.warnings)
    assert any("1 text appears with different labels" in w for w in report.warnings)


def test_html_is_data_and_only_surrounding_whitespace_is_stripped():
    html = '<script>alert("x")</script> <b>refund</b>  &amp; more'
    df = pd.DataFrame({"text": [f"  {html}\n", "plain text"], "label": [" A ", "B"]})
    dataset, _ = validate(df)
    assert dataset.texts == (html, "plain text")
    assert dataset.labels == ("A", "B")


def test_long_and_truncated_texts_are_warned():
    long_text = "word " * 400
    df = pd.DataFrame({"text": [long_text, "short one", "short two"], "label": ["A", "B", "B"]})
    _, report = validate(df, max_tokens=256, limits=IntakeLimits(max_text_chars=1000))
    assert report.long_texts == 1 and report.truncated == 1
    assert "1 text is longer than 1,000 characters" in " ".join(report.warnings)
    assert "1 text is longer than 256 tokens and will be truncated" in report.warnings
    assert report.word_stats.max == 400
    assert report.token_stats.max == 402  # 400 short words plus [CLS] and [SEP]


def test_token_estimate_counts_punctuation_and_long_words():
    # 6 words, "authorisation" (13 characters) costs one more, 5 symbols, [CLS] and [SEP]
    text = "Refund ₹2,499.00 authorisation now!!"
    df = pd.DataFrame({"text": [text, "ok fine"], "label": ["A", "B"]})
    _, report = validate(df)
    assert (report.word_stats.max, report.token_stats.max) == (6, 14)
    assert (report.word_stats.min, report.token_stats.min) == (2, 4)


def test_label_counts_sorted_and_small_classes_warned():
    df = pd.DataFrame({"text": [f"text {i}" for i in range(9)], "label": list("CCCBBBAAD")})
    _, report = validate(df, min_class_size=3)
    assert list(report.labels.items()) == [("B", 3), ("C", 3), ("A", 2), ("D", 1)]
    assert report.small_classes == ("A", "D")
    assert "2 labels have fewer than 3 rows: 'A' (2), 'D' (1)" in " ".join(report.warnings)


def test_only_one_class_or_no_rows_is_an_error():
    one = pd.DataFrame({"text": ["a b", "c d", "e f"], "label": ["A", "A", None]})
    with pytest.raises(DataError, match="only one label \\('A'\\)"):
        validate(one)
    empty = pd.DataFrame({"text": [" ", None, "x y"], "label": ["A", "B", ""]})
    with pytest.raises(DataError) as error:
        validate(empty)
    assert _one_line(error).startswith(
        "no usable rows: every row has an empty text or a missing label"
    )


def test_report_json_has_the_contract_keys():
    dataset, report = validate(_complaints(), max_tokens=4)
    payload = report.to_json()
    assert payload.keys() >= CONTRACT_KEYS
    assert json.loads(json.dumps(payload)) == payload
    assert payload["text_col"] == "complaint" and payload["label_col"] == "desk"
    assert payload["labels"] == {"Card Fraud": 6, "Loan Query": 6, "UPI Dispute": 6}
    assert payload["dropped"] == [] and payload["duplicates"] == 0
    assert payload["truncated"] == 18


def test_dropped_rows_serialise_as_row_and_reason():
    df = pd.DataFrame({"text": ["a b", None, "c d"], "label": ["A", "B", "B"]})
    _, report = validate(df)
    assert report.to_json()["dropped"] == [{"row": 3, "reason": "empty text"}]


# ----------------------------------------------------------------------------------------------
# Dataset and split


def test_dataset_basics_and_export():
    dataset, _ = validate(_complaints(per_desk=2))
    assert len(dataset) == 6
    assert dataset.classes == ("Card Fraud", "Loan Query", "UPI Dispute")
    frame = dataset.to_frame()
    assert list(frame.columns) == ["row", "text", "label", "id"]
    assert frame["row"].tolist() == [2, 3, 4, 5, 6, 7]
    part = dataset.subset([4, 1])
    assert part.rows == (6, 3) and part.extra["id"].tolist() == ["2000", "0001"]
    assert list(part.extra.index) == [0, 1]
    with pytest.raises(DataError):
        dataset.subset([6])


def test_fingerprint_is_stable_and_content_sensitive():
    dataset = Dataset(texts=("paid twice", "card lost"), labels=("UPI", "Card"))
    assert dataset.rows == (2, 3)
    assert dataset.fingerprint == FINGERPRINT
    same = Dataset(texts=["paid twice", "card lost"], labels=["UPI", "Card"], rows=(2, 3))
    assert same.fingerprint == dataset.fingerprint
    assert (
        Dataset(texts=("paid twice", "card lost"), labels=("UPI", "UPI")).fingerprint != FINGERPRINT
    )


def test_fingerprint_changes_when_rows_move():
    """A blank line removed from the file moves every complaint up a row: another data set."""
    before = Dataset(texts=("paid twice", "card lost"), labels=("UPI", "Card"), rows=(3, 4))
    after = Dataset(texts=("paid twice", "card lost"), labels=("UPI", "Card"), rows=(2, 3))
    assert before.fingerprint != after.fingerprint
    assert before.legacy_fingerprint == after.legacy_fingerprint == LEGACY_FINGERPRINT


def test_split_is_stratified_and_deterministic():
    dataset, _ = validate(_complaints(per_desk=10))
    lone = Dataset(texts=("a lone complaint",), labels=("Other",), rows=(99,))
    combined = Dataset(
        texts=dataset.texts + lone.texts,
        labels=dataset.labels + lone.labels,
        rows=dataset.rows + lone.rows,
    )
    train, val = split_dataset(combined, val_fraction=0.2, seed=3)
    assert len(val) == 6 and len(train) == 25
    assert sorted(train.rows + val.rows) == sorted(combined.rows)
    assert {label: val.labels.count(label) for label in val.classes} == dict.fromkeys(DESKS, 2)
    assert "Other" in train.classes and 99 in train.rows
    assert list(train.rows) == sorted(train.rows)
    again = split_dataset(combined, val_fraction=0.2, seed=3)
    assert again[1].rows == val.rows
    assert split_dataset(combined, val_fraction=0.2, seed=4)[1].rows != val.rows


@pytest.mark.parametrize("fraction", [0, 0.6, -0.1, True])
def test_split_rejects_bad_fractions(fraction):
    dataset, _ = validate(_complaints())
    with pytest.raises(DataError, match="val_fraction"):
        split_dataset(dataset, val_fraction=fraction)


def test_split_too_small_is_a_data_error():
    dataset = Dataset(texts=tuple("abcdef"), labels=("A", "A", "B", "B", "C", "C"))
    with pytest.raises(DataError, match="cannot hold out a stratified 20% validation set"):
        split_dataset(dataset, val_fraction=0.2)


def test_load_dataset_from_xlsx(tmp_path):
    rows = [["Ticket ID", "Complaint Text", "Queue"]]
    rows += [
        [f"T{i}", f"complaint {i} about my card", "Card" if i % 2 else "UPI"] for i in range(10)
    ]
    path = _write_xlsx(tmp_path / "tickets.xlsx", rows)
    dataset, report = load_dataset(path, limits=IntakeLimits())
    assert (report.text_col, report.label_col, report.sheet) == (
        "Complaint Text",
        "Queue",
        "Complaints",
    )
    assert report.labels == {"Card": 5, "UPI": 5}
    assert dataset.extra.columns.tolist() == ["Ticket ID"]


@pytest.mark.skipif(not CFPB_TRAIN.exists(), reason="shared CFPB sample not present")
def test_cfpb_sample_is_detected():
    dataset, report = load_dataset(CFPB_TRAIN, limits=IntakeLimits())
    assert (report.text_col, report.label_col) == ("narrative", "product")
    assert len(report.labels) == 5 and report.rows_kept > 600


def test_slice_rows_finds_marked_rows_and_tolerates_no_column():
    marked = Dataset(
        ["a", "b", "c"], ["X", "Y", "X"], extra=pd.DataFrame({"slice": ["twin", "regular", "twin"]})
    )
    assert slice_rows(marked, "twin") == [0, 2]
    assert slice_rows(Dataset(["a"], ["X"]), "twin") == []


def test_text_column_of_an_unlabelled_file_is_found_by_name_then_content():
    named = pd.DataFrame({"id": ["1", "2"], "complaint": ["upi failed", "card lost"]})
    assert detect_text_column(named) == ("complaint", "named 'complaint'")
    unnamed = pd.DataFrame({"ref": ["1", "2"], "notes": ["money debited twice", "card was lost"]})
    assert detect_text_column(unnamed)[0] == "notes"
    labelled = pd.DataFrame({"desk": ["UPI Dispute", "Card Fraud"], "msg": ["upi failed", "x y"]})
    assert detect_text_column(labelled)[0] == "msg"


def test_text_column_is_never_guessed_and_a_given_one_must_exist():
    with pytest.raises(DataError, match="could not tell which column holds the complaint text"):
        detect_text_column(pd.DataFrame({"id": ["1", "2"], "code": ["A", "B"]}))
    with pytest.raises(DataError, match="no column 'txt'.*did you mean 'text'"):
        detect_text_column(pd.DataFrame({"text": ["a b"]}), text_col="txt")
