package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	cmds := []Command{
		{Name: "ok", Run: func(context.Context, []string, io.Writer, io.Writer) error { return nil }},
		{Name: "fail", Run: func(context.Context, []string, io.Writer, io.Writer) error { return errors.New("disk on fire") }},
		// An error quoting a hostile file's name prints on one line,
		// its escapes escaped.
		{Name: "hostile", Run: func(context.Context, []string, io.Writer, io.Writer) error {
			return errors.New("reading notes\x1b]0;ok\x07\nOK: verified")
		}},
		{Name: "flags", Args: "--n N", Run: func(_ context.Context, args []string, _, stderr io.Writer) error {
			fs := NewFlags("prog", "flags", stderr)
			fs.Int("n", 0, "a number")
			return ParseFlags(fs, args, 0)
		}},
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"ok"}, 0, ""},
		{[]string{"fail"}, 1, "prog fail: disk on fire"},
		{[]string{"hostile"}, 1, `prog hostile: reading notes\x1b]0;ok\a\nOK: verified` + "\n"},
		{[]string{"flags", "--n", "3"}, 0, ""},
		{[]string{"flags", "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"flags", "--n", "x"}, 2, "invalid value"},
		{[]string{"flags", "-h"}, 2, "a number"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{nil, 2, "usage: prog <command>"},
	} {
		var out bytes.Buffer
		if code := Run(context.Background(), "prog", cmds, tc.args, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("Run(%q) = %d, %q; want %d and output containing %q", tc.args, code, out.String(), tc.code, tc.out)
		}
	}
}
