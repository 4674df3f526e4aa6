package export

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
)

// csvHeader names the viewing activity's columns.
var csvHeader = []string{"Title", "Started", "Last watched", "Last position", "Watched ranges", "Finished", "Course"}

// writeCSV writes member's viewing activity to w: a header, then one row per history item, as
// eachItem reads them.
func writeCSV(ctx context.Context, pool *pgxpool.Pool, w *bufio.Writer, member int64, flush func() error) error {
	out := csv.NewWriter(w)
	if err := out.Write(csvHeader); err != nil {
		return err
	}
	err := eachItem(ctx, pool, member, func(it Item) error {
		return out.Write(csvRow(it))
	}, func() error {
		out.Flush() // into w; flush sends w on
		if err := out.Error(); err != nil {
			return errors.Join(errClient, err)
		}
		return flush()
	})
	if err != nil {
		return err
	}
	out.Flush()
	if err := out.Error(); err != nil {
		return err
	}
	return flush()
}

// csvRow is it as a row of the viewing activity. Every cell goes through neutralise.
func csvRow(it Item) []string {
	started := ""
	if it.StartedAt != nil {
		started = csvTime(*it.StartedAt)
	}
	finished := "no"
	if it.Finished {
		finished = "yes"
	}
	course := ""
	if it.Collection != nil {
		course = *it.Collection
	}
	row := []string{it.Title, started, csvTime(it.EventTime), clock(it.PositionMS), rangesText(it.Watched), finished, course}
	for i := range row {
		row[i] = neutralise(row[i])
	}
	return row
}

func csvTime(t time.Time) string { return t.UTC().Format(time.DateTime) + " UTC" }

// neutralise keeps a cell from being read as a formula by a spreadsheet (CSV injection), as
// OWASP recommends: a cell that starts with =, +, -, @, a tab or a carriage return gets a
// single quote in front, which the spreadsheet shows as text. So does one whose first
// character after leading spaces is =, +, - or @: a collection name keeps its leading spaces
// (" =HYPERLINK(...)"), and spreadsheets that trim a cell before reading it would run it
// (the import reads such a cell as a formula too). Titles and collection names are anyone's
// text; the other cells never start so, but pass through too.
func neutralise(cell string) string {
	if cell == "" {
		return cell
	}
	first := strings.TrimLeftFunc(cell, unicode.IsSpace)
	if cell[0] == '\t' || cell[0] == '\r' || (first != "" && strings.ContainsRune("=+-@", rune(first[0]))) {
		return "'" + cell
	}
	return cell
}

// csvFilename and jsonFilename are the attachments' names for member.
func csvFilename(member int64) string {
	return "playhead-viewing-activity-" + strconv.FormatInt(member, 10) + ".csv"
}

func jsonFilename(member int64) string {
	return "playhead-export-" + strconv.FormatInt(member, 10) + ".json"
}
