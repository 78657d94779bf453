package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResolveCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"releases":[113]}`)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if err := runResolve(context.Background(), []string{"ensembl", "--opt", "base=" + srv.URL}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != "113" {
		t.Errorf("resolve ensembl = %q", got)
	}
	out.Reset()
	if err := runResolve(context.Background(), []string{"static", "--opt", "value=x1"}, &out, &errb); err != nil || strings.TrimSpace(out.String()) != "x1" {
		t.Errorf("static: %v %q", err, out.String())
	}
	out.Reset()
	if err := runResolvers(context.Background(), nil, &out, &errb); err != nil || !strings.Contains(out.String(), "uniprot") {
		t.Errorf("resolvers: %v %q", err, out.String())
	}
}
