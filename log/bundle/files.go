package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// maxFileBytes bounds a bundle file [Verify] reads whole: all but the
// entries and the PROV document, which it streams. The largest of them,
// an anchor record with its tokens and chains, is tens of kilobytes.
const maxFileBytes = 16 << 20

// validName reports whether a manifest's file name is a path inside the
// bundle: slash-separated, relative, with no "." or ".." element (a name
// such as "anchors/../../x" would be read from outside it).
func validName(name string) bool {
	return fs.ValidPath(name) && name != "." && !strings.Contains(name, `\`)
}

// open opens the bundle file name (a valid name) for reading. It must be a
// regular file inside the bundle: a symbolic link, a named pipe or a
// device is refused before it is opened (opening a pipe would wait for a
// writer; a device such as /dev/zero never ends), and the file opened must
// be the one looked at.
func (c *checker) open(name string) (*os.File, fs.FileInfo, error) {
	if !validName(name) {
		return nil, nil, errors.New("is not a path inside the bundle")
	}
	if c.opened == nil {
		c.opened = map[string]bool{}
	}
	c.opened[name] = true
	fi, err := c.root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("is not a regular file (%s)", fileType(fi.Mode()))
	}
	f, err := c.root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	if now, err := f.Stat(); err != nil || !os.SameFile(fi, now) {
		f.Close()
		return nil, nil, errors.New("changed while it was opened")
	}
	return f, fi, nil
}

// readWhole reads the bundle file name, at most maxFileBytes of it.
func (c *checker) readWhole(name string) ([]byte, error) {
	f, fi, err := c.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("is %d bytes, over the %d a bundle file other than %s and %s may have", fi.Size(), maxFileBytes, EntriesFile, ProvFile)
	}
	// Read into a buffer of the size stat gave, one byte over: a file
	// that grows past it fails, and io.ReadAll's growing would cost two
	// and a half times a large file.
	b := make([]byte, 0, min(fi.Size(), maxFileBytes)+1)
	for len(b) < cap(b) {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(b)) > fi.Size() {
		return nil, fmt.Errorf("grew past the %d bytes it had while it was read", fi.Size())
	}
	return b, nil
}

// fileType names what a non-regular file is, for the problem that
// refuses it.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// checkUnread reports the files the manifest lists that no check read: a
// bundle holds no file its checks do not cover (a listed file that
// nothing reads would pass with any content).
func (c *checker) checkUnread() {
	for _, n := range sortedFiles(c.m.Files) {
		if !c.opened[n] {
			c.bad(n, "is listed in %s but is not a file of a bundle of entries [%d, %d): nothing would check it", ManifestFile, c.m.From, c.m.To)
		}
	}
}

// checkClaims checks what the manifest says of the other files: that the
// checkpoint is cosigned (by witnesses.txt's keys, which
// checkCosignatures holds it to) and where the anchors' trust comes from.
func (c *checker) checkClaims() {
	_, witnesses := c.m.Files[WitnessesFile]
	if c.m.Cosigned != witnesses {
		c.bad(ManifestFile, "says cosigned %v, but the bundle %s %s", c.m.Cosigned, map[bool]string{true: "has", false: "has no"}[witnesses], WitnessesFile)
	}
	records := 0
	for _, n := range sortedFiles(c.m.Files) {
		if strings.HasPrefix(n, AnchorsDir+"/") {
			records++
		}
	}
	_, trusted := c.m.Files[TSARootsFile]
	want := ""
	switch {
	case records > 0 && trusted:
		want = "config"
	case records > 0:
		want = "records"
	}
	if c.m.Trust != want {
		c.bad(ManifestFile, "says trust %q, but the bundle has %d anchor records and %s: that is trust %q", c.m.Trust, records,
			map[bool]string{true: "trust roots (" + TSARootsFile + ")", false: "no trust roots"}[trusted], want)
	}
}
