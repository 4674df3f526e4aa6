// Package sheettest writes spreadsheets for tests with openpyxl (python3-openpyxl, which
// scripts/deps.sh installs): sheets written by another library than the one the import reads
// with, as operators' sheets are. openpyxl saves formulas without a cached value, as many
// generators do.
package sheettest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// debianPython is the interpreter python3-openpyxl installs into; a python3 found first on
// PATH (pyenv, a venv) may not have it.
const debianPython = "/usr/bin/python3"

// Openpyxl runs script after `from openpyxl import Workbook`; the script leaves its workbook in
// wb, which is saved and returned as .xlsx bytes.
func Openpyxl(t testing.TB, script string) []byte {
	t.Helper()
	return Python(t, script+"\nwb.save(OUT)\n")
}

// Python runs script with openpyxl's interpreter after `import os` and `from openpyxl import
// Workbook`; the script writes its .xlsx to the path in OUT (to edit the saved parts itself, as
// a sheet with formulas' cached values needs), whose bytes are returned.
func Python(t testing.TB, script string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sheet.xlsx")
	cmd := exec.Command(debianPython, "-c", "import os\nfrom openpyxl import Workbook\nOUT = os.environ['OUT']\n"+script)
	cmd.Env = append(os.Environ(), "OUT="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 openpyxl (run scripts/deps.sh): %v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
