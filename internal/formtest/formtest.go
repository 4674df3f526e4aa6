// Package formtest builds multipart/form-data bodies for tests of the upload routes.
package formtest

import (
	"bytes"
	"mime/multipart"
)

// Multipart returns a form of fields, written in order, and when file is not nil a "file"
// part named fileName last, with its Content-Type (which carries the boundary).
func Multipart(fields [][2]string, fileName string, file []byte) (body []byte, contentType string) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, kv := range fields {
		_ = w.WriteField(kv[0], kv[1])
	}
	if file != nil {
		fw, _ := w.CreateFormFile("file", fileName)
		_, _ = fw.Write(file)
	}
	_ = w.Close()
	return b.Bytes(), w.FormDataContentType()
}
