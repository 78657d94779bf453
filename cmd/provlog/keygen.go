package main

// provlog keygen and vkey: the log's keys.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
)

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", stderr)
	data := fs.String("data", "", "data dir to create the keys in")
	origin := fs.String("origin", "", "the log's origin (default provlog.local/<hostname>)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	if err := keygen(*data, *origin); err != nil {
		return err
	}
	vkey, err := readVKey(filepath.Join(*data, logVKeyFile))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}

func runVKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vkey", stderr)
	data := fs.String("data", "", "data dir")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	vkey, err := readVKey(filepath.Join(*data, logVKeyFile))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}
