-- +goose Up
-- Which sheet of a workbook was imported, and the text a hyperlink cell showed for a row's
-- video ("강의 보기"), kept so the report can show the row as the operator knows it.
ALTER TABLE imports ADD COLUMN sheet text NOT NULL DEFAULT '';
ALTER TABLE import_rows ADD COLUMN label text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE import_rows DROP COLUMN label;
ALTER TABLE imports DROP COLUMN sheet;
