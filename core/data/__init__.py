"""Complaint data: safe intake of CSV/TSV/XLSX/Parquet, column detection, the validation report,
the data set and its split, the demo-data generator and formula-safe export."""
